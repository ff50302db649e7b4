"""Making room for a higher-priority group by evicting lower-priority pods, as few as may be.

Victims are chosen as kube-scheduler chooses them, with gangs as units
(:mod:`~fluence_core.scheduler.victims`). The room is sought in *scopes*: each node for a
lone pod, each domain of its required level for a group that requires a topology level
(it never leaves it), the whole cluster for any other group. In each scope every
lower-priority pod that may go is taken out of the matcher; if the group then fits, the
most important are given back one after another (highest priority first, then the
longest running) while it still fits, and a gang that would be left below its
``minCount`` goes whole. The scope whose victims hurt least
(:func:`~fluence_core.scheduler.victims.disruption`) is chosen; only then are its victims
taken out for good and evicted. Every step is a real match on the view's matcher,
restricted to the scope, so the embedded matcher and Fluxion take the same victims: the
choice depends on the room each scope has, not on where a matcher would rather go.

**Nominate, then bind.** An evicted pod runs until its kubelet has stopped it. The group
is not bound meanwhile: its match stays held (so nothing else takes the room), its pods
are told where they are going (``status.nominatedNodeName``, as kube-scheduler writes
it), and :meth:`Preemptor.claim` hands the match to the cycle once every victim is gone.
A nomination is dropped, its room given back, when the group is no longer pending or its
pods changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fluence_core.kube.api import PODS, PRIORITY_CLASSES, ClusterAPI
from fluence_core.errors import TopologyError
from fluence_core.kube.errors import ApiError
from fluence_core.kube.meta import metadata_of
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_preferring
from fluence_core.matcher.pooled import restore_order
from fluence_core.models import Group
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.events import EventRecorder
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.victims import (
    Disruption, Holder, Member, disruption, group_priority, read_holders, without,
)
from fluence_core.scheduler.view import ClusterView
from fluence_core.topology import attempts

Match = Callable[[Group], "GroupMatch | GroupMiss"]

MIN_CANDIDATES = 100
MIN_CANDIDATES_PERCENT = 10
"""How many scopes with a victim set are compared before one is chosen: kube-scheduler's
defaults (``minCandidateNodesAbsolute``, ``minCandidateNodesPercentage``), the larger."""


@dataclass(frozen=True)
class Nomination:
    """Room made for a group by preemption, held until its victims are gone."""

    group: Group
    match: GroupMatch
    pods: frozenset[g.PodKey]
    victims: dict[g.PodKey, str]
    """Each evicted pod and its uid (a new pod of the same name is not the victim)."""


@dataclass(frozen=True)
class _Candidate:
    scope: str
    nodes: frozenset[str] | None
    victims: tuple[tuple[Member, int], ...]
    """Each victim with its holder's priority."""
    cost: Disruption


class Preemptor:
    """Chooses, evicts and waits out the victims a waiting group may take the room of."""

    def __init__(self, cluster: ClusterAPI, view: ClusterView, records: RecordBook,
                 events: EventRecorder | None = None) -> None:
        self.cluster = cluster
        self.events = events or EventRecorder(cluster)
        self.view = view
        self.records = records
        self.nominations: dict[str, Nomination] = {}
        """Group key -> the room held for it while its victims terminate."""
        self._holders: list[Holder] | None = None
        """Every holder that could lose pods, read at the first preemption of a cycle and
        again after each eviction (the records changed)."""
        self._class_values: dict[str, int | None] = {}

    def begin(self) -> None:
        """A new cycle: holders and PriorityClass values are read again when first needed."""
        self._holders = None
        self._class_values = {}

    # -- nominations -----------------------------------------------------------------------

    def claim(self, pending: g.PendingGroup) -> Nomination | str | None:
        """The room held for ``pending`` once its victims are gone, or why it still waits, or
        None when none is held (then it is matched as any group; a nomination whose group's
        pods changed is given back first)."""
        nomination = self.nominations.get(pending.key)
        if nomination is None:
            return None
        if frozenset(g.pod_key(p) for p in pending.pods) != nomination.pods:
            self._drop(pending.key, "its pods changed")
            return None
        left = [key for key, uid in nomination.victims.items() if self._running(key, uid)]
        if left:
            return (f"waiting for {len(left)} preempted pod(s) to terminate: "
                    + ", ".join(f"{ns}/{name}" for ns, name in sorted(left)[:5]))
        del self.nominations[pending.key]
        return nomination

    def keep_only(self, keys: Iterable[str]) -> None:
        """Give back the room held for groups no longer pending (deleted, or bound)."""
        wanted = set(keys)
        for key in [k for k in self.nominations if k not in wanted]:
            self._drop(key, "it is no longer pending")

    def _drop(self, key: str, why: str) -> None:
        nomination = self.nominations.pop(key)
        self.view.release_match(nomination.match)
        self.view.generation += 1
        logger.info("group %s: the room preemption made is given back: %s", key, why)

    def _running(self, key: g.PodKey, uid: str) -> bool:
        pod = self.view.pods.get(key)
        return (pod is not None and not g.is_finished(pod)
                and metadata_of(pod).get("uid", uid) == uid)

    # -- choosing victims ------------------------------------------------------------------

    def make_room(self, pending: g.PendingGroup, group: Group,
                  match: Match | None = None) -> GroupMatch | None:
        """Evict the least disruptive set of lower-priority pods that lets ``group`` fit (by
        ``match``, the cycle's own way of matching it) and nominate it there; return its
        match, held. None, with nothing touched, when no such set exists."""
        matching = match if match is not None else self._match
        priority = self.priority_of(pending)
        holders = [h for h in self._read_holders() if h.priority < priority]
        if not holders:
            return None
        level = self._required_level(group)
        scopes = self._scopes(group, level)
        wanted = max(MIN_CANDIDATES, len(scopes) * MIN_CANDIDATES_PERCENT // 100)
        best: _Candidate | None = None
        found = 0
        for scope, nodes in scopes:
            candidate = self._candidate(group, scope, nodes, holders, matching)
            if candidate is None:
                continue
            logger.debug("group %s: in %s it would evict %s", group.name, scope,
                         ", ".join("/".join(m.key) for m, _ in candidate.victims))
            if best is None or candidate.cost.key() < best.cost.key():
                best = candidate
            found += 1
            if found >= wanted:
                break
        if best is None:
            return None
        return self._preempt(pending, group, best, holders, matching)

    def priority_of(self, pending: g.PendingGroup) -> int:
        """The group's priority: its PodGroup's own when it states one, else its pods'."""
        stated = group_priority(pending.pod_group, self._class_value)
        return pending.priority if stated is None else stated

    def _match(self, group: Group) -> GroupMatch | GroupMiss:
        return match_preferring(group, self.view.graph, self.view.matcher)

    def _required_level(self, group: Group) -> int | None:
        try:
            return attempts(self.view.graph.levels, group.topology)[-1]
        except TopologyError:
            return None

    def _scopes(self, group: Group, level: int | None
                ) -> list[tuple[str, frozenset[str] | None]]:
        """Where room is sought, each scope on its own: the domains of the required level,
        or each node for a lone pod, or the whole cluster."""
        graph = self.view.graph
        if level is not None:
            return [("/".join(domain), frozenset(n.name for n in nodes))
                    for domain, nodes in graph.domains(level).items()]
        if len(group.pods) == 1:
            allowed = group.pods[0].allowed
            return [(node.name, frozenset((node.name,))) for node in graph.nodes
                    if not node.down and (allowed is None or node.name in allowed)]
        return [("the cluster", None)]

    def _candidate(self, group: Group, scope: str, nodes: frozenset[str] | None,
                   holders: list[Holder], match: Match) -> _Candidate | None:
        """The least set of victims inside ``nodes`` that lets ``group`` fit there, by
        kube-scheduler's rule: all lower-priority pods out, then the most important given
        back while the group still fits. The matcher is left as it was."""
        scoped = _within(group, nodes)
        if scoped is None:
            return None
        units = [(h, unit) for h in holders
                 for unit in h.units(m for m in h.members if nodes is None or m.node in nodes)]
        if not units:
            return None
        trial = _Trial(self.view, holders)
        try:
            for _, unit in units:
                trial.take(unit)
            if not self._fits(scoped, match):
                return None
            units.sort(key=lambda u: (-u[0].priority, min(m.started for m in u[1])))
            leaving: list[tuple[Member, ...]] = []
            for holder, unit in units:
                trial.give_back(unit)
                if not self._fits(scoped, match):
                    trial.take(unit)
                    leaving.append(unit)
            victims = _whole_gangs(holders, {m.key for unit in leaving for m in unit})
            return _Candidate(scope, nodes, victims, disruption(victims))
        finally:
            trial.undo()

    def _fits(self, group: Group, match: Match) -> bool:
        outcome = match(group)
        if isinstance(outcome, GroupMatch):
            self.view.release_match(outcome)
            return True
        return False

    # -- evicting --------------------------------------------------------------------------

    def _preempt(self, pending: g.PendingGroup, group: Group, chosen: _Candidate,
                 holders: list[Holder], match: Match) -> GroupMatch | None:
        """Take ``chosen``'s victims out, match the group in its scope, then evict them and
        nominate the group; on a miss put everything back."""
        scoped = _within(group, chosen.nodes) or group
        trial = _Trial(self.view, holders)
        trial.take(tuple(m for m, _ in chosen.victims))
        outcome = match(scoped)
        if not isinstance(outcome, GroupMatch):
            trial.undo()
            logger.warning("group %s: room in %s was found but the match missed; nothing is "
                           "evicted", group.name, chosen.scope)
            return None
        logger.info("group %s: preempting %d pod(s) in %s (highest priority %d)",
                    pending.key, len(chosen.victims), chosen.scope, chosen.cost.highest)
        self._evict(pending, trial, [m for m, _ in chosen.victims])
        self._nominate(pending, scoped, outcome, [m for m, _ in chosen.victims])
        return outcome

    def _evict(self, pending: g.PendingGroup, trial: _Trial, victims: list[Member]) -> None:
        """Rewrite each victim's record as the trial left it (dropped when nothing stays),
        then delete the victims."""
        self._holders = None
        touched: set[g.Owner] = set()
        for owner, record, allocations in trial.changed():
            gone = {m.key[1] for m in victims if m.record is record}
            record.pods = [p for p in record.pods if p not in gone]
            held = self.records.held.get(owner, [])
            if allocations and record.pods:
                record.allocations = allocations
            elif record in held:
                for allocation in allocations.values():
                    self.view.matcher.cancel(allocation.jobid)
                held.remove(record)
            if not held:
                self.records.held.pop(owner, None)  # no empty entry left behind
            touched.add(owner)
        for owner in touched:
            self.records.write(owner)
        for member in victims:
            namespace, name = member.key
            logger.info("preempting %s/%s (priority %d) on %s for %s", namespace, name,
                        g.priority(member.pod), member.node, pending.key)
            self.events.post(member.pod, "Warning", "Preempted",
                              f"preempted by fluence for {pending.key}")
            self.cluster.delete(PODS, name, namespace)

    def _nominate(self, pending: g.PendingGroup, group: Group, match: GroupMatch,
                  victims: list[Member]) -> None:
        self.nominations[pending.key] = Nomination(
            group, match, frozenset(g.pod_key(p) for p in pending.pods),
            {m.key: str(metadata_of(m.pod).get("uid") or "") for m in victims})
        for pod in pending.pods:
            namespace, name = g.pod_key(pod)
            node = match.placements[f"{namespace}/{name}"].node
            if node is None:
                continue
            try:
                self.cluster.patch_status(PODS, name, {"status": {"nominatedNodeName": node}},
                                          namespace)
            except ApiError as error:
                logger.debug("cannot nominate %s/%s to %s: %s", namespace, name, node, error)

    # -- reading ---------------------------------------------------------------------------

    def _read_holders(self) -> list[Holder]:
        if self._holders is None:
            self._holders = read_holders(self.records.held, self.view.pods,
                                         self.view.pod_groups, self._class_value)
        return self._holders

    def _class_value(self, name: str) -> int | None:
        """A PriorityClass's value, read once per cycle; None (logged) when it cannot be."""
        if name not in self._class_values:
            value: int | None = None
            try:
                found = self.cluster.get(PRIORITY_CLASSES, name)
                if found is not None and isinstance(found.get("value"), int):
                    value = int(found["value"])
            except ApiError as error:
                logger.warning("cannot read PriorityClass %s: %s", name, error)
            self._class_values[name] = value
        return self._class_values[name]


def _within(group: Group, nodes: frozenset[str] | None) -> Group | None:
    """``group`` held to ``nodes`` (each pod's allowed nodes and preference tiers narrowed),
    or None when some pod may use none of them."""
    if nodes is None:
        return group
    pods = []
    for pod in group.pods:
        allowed = nodes if pod.allowed is None else pod.allowed & nodes
        if not allowed:
            return None
        tiers = tuple(t & allowed for t in pod.preferred if t & allowed)
        pods.append(dataclasses.replace(pod, allowed=allowed, preferred=tiers))
    return dataclasses.replace(group, pods=tuple(pods))


def _whole_gangs(holders: list[Holder], leaving: set[g.PodKey]
                 ) -> tuple[tuple[Member, int], ...]:
    """The victims, with every gang that would fall below its ``minCount`` taken whole."""
    victims: list[tuple[Member, int]] = []
    for holder in holders:
        going = holder.closure(leaving)
        victims.extend((m, holder.priority) for m in holder.members if m.key in going)
    return tuple(victims)


class _Trial:
    """Members taken out of the matcher for a dry run: each touched record holds, in the
    matcher, its allocations less what its leaving members hold (nothing once they all
    leave); :meth:`undo` holds every record as it was."""

    def __init__(self, view: ClusterView, holders: list[Holder]) -> None:
        self.view = view
        self._owner: dict[int, g.Owner] = {}
        self._members: dict[int, list[Member]] = {}
        for holder in holders:
            for member in holder.members:
                self._owner[id(member.record)] = holder.owner
                self._members.setdefault(id(member.record), []).append(member)
        self._records: dict[int, HeldPlacement] = {}
        self._leaving: dict[int, set[g.PodKey]] = {}
        self._held: dict[int, dict[str, Allocation]] = {}

    def take(self, members: Iterable[Member]) -> None:
        for member in members:
            self._leaving.setdefault(id(member.record), set()).add(member.key)
            self._records[id(member.record)] = member.record
        self._apply({id(m.record) for m in members})

    def give_back(self, members: Iterable[Member]) -> None:
        for member in members:
            self._leaving.get(id(member.record), set()).discard(member.key)
        self._apply({id(m.record) for m in members})

    def undo(self) -> None:
        for leaving in self._leaving.values():
            leaving.clear()
        self._apply(set(self._records))

    def changed(self) -> list[tuple[g.Owner, HeldPlacement, dict[str, Allocation]]]:
        """Each record some member left, with what it holds now."""
        return [(self._owner[rid], self._records[rid], self._held[rid])
                for rid, leaving in self._leaving.items() if leaving]

    def _apply(self, record_ids: set[int]) -> None:
        matcher = self.view.matcher
        for rid in record_ids:
            record = self._records[rid]
            for allocation in self._held.get(rid, record.allocations).values():
                matcher.cancel(allocation.jobid)
            leaving = [m for m in self._members.get(rid, []) if m.key in self._leaving[rid]]
            everyone = {m.key for m in self._members.get(rid, [])}
            now: dict[str, Allocation] = {}
            if not leaving:
                now = dict(record.allocations)
            elif {m.key for m in leaving} != everyone:
                for kind, allocation in record.allocations.items():
                    kept = without(allocation, leaving, self.view.graph)
                    if kept is not None:
                        now[kind] = kept
            for allocation in restore_order(now.values()):
                matcher.restore(allocation)
            self._held[rid] = now
