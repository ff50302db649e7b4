"""Making room for a higher-priority group by evicting lower-priority placements.

Victims are held records whose live pods all have a lower priority than the
waiting group and none is protected (``names.PROTECTED_ANNOTATION``). They are
cancelled lowest priority first until the group fits; only then are their
records dropped and their pods evicted. If it never fits, every cancelled
allocation is restored and nothing is evicted.

A group that requires a topology level (:mod:`fluence_core.topology`) is made room for
inside one domain of that level at a time: only victims holding something in that domain
are cancelled, the domain with the most room to win (free plus what its victims hold)
first. The match that decides is the group's own, which never leaves its required level,
so preemption never places a gang against its constraint, and never evicts pods in a
domain the gang will not use.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from fluence_core import names
from fluence_core.kube.api import PODS, ClusterAPI, KubeObject
from fluence_core.errors import TopologyError
from fluence_core.graph import Domain
from fluence_core.log import logger
from fluence_core.matcher.domains import rooms
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_group
from fluence_core.models import Group
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.events import EventRecorder
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.view import ClusterView
from fluence_core.topology import attempts
from fluence_core.kube.meta import annotations_of

_Victim = tuple[int, g.Owner, HeldPlacement, list[KubeObject]]


class Preemptor:
    """Finds, and if it helps evicts, the placements a waiting group may take over."""

    def __init__(self, cluster: ClusterAPI, view: ClusterView, records: RecordBook,
                 events: EventRecorder | None = None) -> None:
        self.cluster = cluster
        self.events = events or EventRecorder(cluster)
        self.view = view
        self.records = records
        self._candidates: list[_Victim] | None = None
        """Every held record that could be a victim (live pods, none protected), lowest
        priority first: read once per cycle, at the first preemption (it was read again
        for every group that needed room, a walk of every record per waiting pod)."""
        self._tops: list[int] = []
        self._evicted: set[int] = set()
        """Records (by identity) evicted since the candidates were read."""

    def begin(self) -> None:
        """A new cycle: the candidates are read again when first needed.

        Within a cycle the view does not change, and a record committed earlier in it
        belongs to a group of at least the priority of any group after it (groups go by
        priority), so it is never a victim of those: the candidates read at the first
        preemption hold for the rest of the cycle, less what was evicted.
        """
        self._candidates = None
        self._evicted = set()

    def make_room(
        self, pending: g.PendingGroup, group: Group,
        match: Callable[[Group], GroupMatch | GroupMiss] | None = None,
    ) -> GroupMatch | None:
        """Cancel lower-priority, unprotected placements until ``group`` fits (by ``match``,
        the cycle's own way of matching it); evict them if it does and return its match,
        else restore them and return None."""
        victims = self._victims(pending.priority)
        if not victims:
            return None
        victims.sort(key=lambda v: v[0])
        level = self._required_level(group)
        if level is None:
            return self._try(pending, group, victims, match)
        for domain, inside in self._by_domain(victims, level):
            logger.debug("group %s: making room inside %s", group.name, "/".join(domain))
            outcome = self._try(pending, group, inside, match)
            if outcome is not None:
                return outcome
        return None

    def _required_level(self, group: Group) -> int | None:
        try:
            return attempts(self.view.graph.levels, group.topology)[-1]
        except TopologyError:
            return None

    def _by_domain(self, victims: list[_Victim], level: int) -> list[tuple[Domain, list[_Victim]]]:
        """Each domain of ``level`` with the victims holding something in it (in their
        order), the domain with the most cores to win first."""
        graph = self.view.graph
        found = rooms(graph, self.view.matcher, level)
        inside: dict[Domain, list[_Victim]] = {domain: [] for domain in found}
        winnable = {domain: room.free_cores for domain, room in found.items()}
        for victim in victims:
            if id(victim[2]) in self._evicted:
                continue
            touched: dict[Domain, int] = {}
            for allocation in victim[2].allocations.values():
                for share in allocation.nodes:
                    if graph.has_node(share.node):
                        domain = graph.node(share.node).domain(level)
                        touched[domain] = touched.get(domain, 0) + len(share.cores)
            for domain, cores in touched.items():
                if domain in inside:
                    inside[domain].append(victim)
                    winnable[domain] += cores
        ordered = sorted((d for d in inside if inside[d]), key=lambda d: -winnable[d])
        return [(domain, inside[domain]) for domain in ordered]

    def _try(self, pending: g.PendingGroup, group: Group, victims: list[_Victim],
             match: Callable[[Group], GroupMatch | GroupMiss] | None) -> GroupMatch | None:
        """Cancel ``victims`` in turn until ``group`` fits: evict them then, else restore."""
        matcher = self.view.matcher
        taken: list[tuple[g.Owner, HeldPlacement, list[KubeObject]]] = []
        for _, owner, record, live in victims:
            if id(record) in self._evicted:
                continue
            for allocation in record.allocations.values():
                matcher.cancel(allocation.jobid)
            taken.append((owner, record, live))
            outcome = (match(group) if match is not None
                       else match_group(group, self.view.graph, matcher))
            if isinstance(outcome, GroupMatch):
                for victim_owner, victim, pods in taken:
                    self._evict(pending, victim_owner, victim, pods)
                return outcome
        for _, record, _ in taken:
            for allocation in record.allocations.values():
                matcher.restore(allocation)
        return None

    def _victims(self, priority: int) -> list[_Victim]:
        """The candidates of a lower priority than ``priority``, lowest first."""
        if self._candidates is None:
            self._candidates = sorted(self._read_candidates(), key=lambda v: v[0])
            self._tops = [v[0] for v in self._candidates]
        return self._candidates[:bisect_left(self._tops, priority)]

    def _read_candidates(self) -> list[_Victim]:
        candidates: list[_Victim] = []
        for owner, records in self.records.held.items():
            for record in records:
                live = [p for p in (self.view.pods.get((owner[1], name)) for name in record.pods)
                        if p is not None and not g.is_finished(p)]
                if not live:
                    continue
                top = max(g.priority(p) for p in live)
                protected = any(annotations_of(p).get(names.PROTECTED_ANNOTATION) == "true"
                                for p in live)
                if not protected:
                    candidates.append((top, owner, record, live))
        return candidates

    def _evict(self, pending: g.PendingGroup, owner: g.Owner, record: HeldPlacement,
               pods: list[KubeObject]) -> None:
        self._evicted.add(id(record))
        held = self.records.held
        held[owner].remove(record)
        if not held[owner]:
            del held[owner]  # no empty entry left behind
        self.records.write(owner)
        for pod in pods:
            namespace, name = g.pod_key(pod)
            logger.info("preempting %s/%s (priority %d) for %s",
                        namespace, name, g.priority(pod), pending.key)
            self.events.post(pod, "Warning", "Preempted", f"preempted by fluence for {pending.key}")
            self.cluster.delete(PODS, name, namespace)
