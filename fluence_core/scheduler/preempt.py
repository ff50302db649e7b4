"""Making room for a higher-priority group by evicting lower-priority placements.

Victims are held records whose live pods all have a lower priority than the
waiting group and none is protected (``names.PROTECTED_ANNOTATION``). They are
cancelled lowest priority first until the group fits; only then are their
records dropped and their pods evicted. If it never fits, every cancelled
allocation is restored and nothing is evicted.
"""

from __future__ import annotations

from collections.abc import Callable

from fluence_core import names
from fluence_core.cluster_api import PODS, ClusterAPI, KubeDict
from fluence_core.log import logger
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_group
from fluence_core.models import Group
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.events import EventRecorder
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.view import ClusterView

_Victim = tuple[int, g.Owner, HeldPlacement, list[KubeDict]]


class Preemptor:
    """Finds, and if it helps evicts, the placements a waiting group may take over."""

    def __init__(self, cluster: ClusterAPI, view: ClusterView, records: RecordBook,
                 events: EventRecorder | None = None) -> None:
        self.cluster = cluster
        self.events = events or EventRecorder(cluster)
        self.view = view
        self.records = records

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
        matcher = self.view.matcher
        victims.sort(key=lambda v: v[0])
        taken: list[tuple[g.Owner, HeldPlacement, list[KubeDict]]] = []
        for _, owner, record, live in victims:
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
        victims: list[_Victim] = []
        for owner, records in self.records.held.items():
            for record in records:
                live = [p for p in (self.view.pods.get((owner[1], name)) for name in record.pods)
                        if p is not None and not g.is_finished(p)]
                if not live:
                    continue
                top = max(g.priority(p) for p in live)
                protected = any(g.annotations_of(p).get(names.PROTECTED_ANNOTATION) == "true"
                                for p in live)
                if top < priority and not protected:
                    victims.append((top, owner, record, live))
        return victims

    def _evict(self, pending: g.PendingGroup, owner: g.Owner, record: HeldPlacement,
               pods: list[KubeDict]) -> None:
        self.records.held[owner].remove(record)
        self.records.write(owner)
        for pod in pods:
            namespace, name = g.pod_key(pod)
            logger.info("preempting %s/%s (priority %d) for %s",
                        namespace, name, g.priority(pod), pending.key)
            self.events.post(pod, "Warning", "Preempted", f"preempted by fluence for {pending.key}")
            self.cluster.delete(PODS, name, namespace)
