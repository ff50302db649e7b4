"""Making room for a higher-priority group by evicting lower-priority pods, as few as may be.

Victims are chosen as kube-scheduler chooses them, with gangs as units
(:mod:`~fluence_core.scheduler.victims`), in *scopes*: each node for a lone pod, each
domain of its required level for a group that requires one. In a scope every
lower-priority pod that may go is taken out of the matcher; if the group then fits, the
most important are given back (highest priority, then longest running) while it still
fits, and a gang left below its ``minCount`` goes whole. The scope whose victims hurt
least (:func:`~fluence_core.scheduler.victims.disruption`) is chosen, the likeliest tried
first. A group bound to no domain takes pods out least important first until it fits,
then gives back what it can. Every step is a real match on the view's matcher, so the
embedded matcher and Fluxion take the same victims. A victim's devices count as freed
when its claims are reserved for victims alone: the resourceclaim controller deallocates
those once the victims are gone.

**Nominate, then bind.** An evicted pod runs until its kubelet has stopped it. The
group's match stays held meanwhile, with the devices it took (nothing else takes them),
its pods are told where they are going (``status.nominatedNodeName``), and
:meth:`Preemptor.claim` hands the match to the cycle once every victim is gone and no
claim holds those devices any more. A terminating victim is held again from what it
requests (a pin) where room is left beside the nomination. A nomination is dropped, its
room given back, when the group is no longer pending and ready, or its pods changed.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fluence_core.dra.devices import DeviceId
from fluence_core.dra.plan import DevicePlan
from fluence_core.dra.state import ClaimKey
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
    Disruption, Holder, Member, disruption, group_priority, least_disruption, read_holders,
    without,
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
    devices: frozenset[DeviceId] = frozenset()
    """The devices the group's match took, held for it until it binds."""
    freed: frozenset[ClaimKey] = frozenset()
    """The victims' claims that hold some of them until the controller deallocates them."""


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
        self._victims: _Pool | None = None
        """Every holder that could lose pods, read at the first preemption of a cycle."""
        self._class_values: dict[str, int | None] = {}

    def begin(self) -> None:
        """A new cycle: holders and PriorityClass values are read again when first needed."""
        self._victims = None
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
        claimed = self.view.dra.still_claimed(sorted(nomination.devices))
        if any(key not in nomination.freed for key in claimed.values()):
            # another scheduler allocated one to a claim of its own meanwhile
            self._drop(pending.key, "a device it was promised went to another claim")
            return None
        if claimed:
            return (f"waiting for {len(claimed)} device(s) of preempted pods' claims to be "
                    "deallocated: " + ", ".join(str(d) for d in list(claimed)[:5]))
        del self.nominations[pending.key]
        self.view.dra.unhold(pending.key)
        return nomination

    def keep_only(self, keys: Iterable[str]) -> None:
        """Give back the room held for groups not among ``keys``, the groups pending and ready
        (one deleted, bound, or a gang that lost members and waits for them again)."""
        wanted = set(keys)
        for key in [k for k in self.nominations if k not in wanted]:
            self._drop(key, "it is no longer pending and ready")

    def _drop(self, key: str, why: str) -> None:
        nomination = self.nominations.pop(key)
        self.view.release_match(nomination.match)
        self.view.dra.unhold(key)
        self.view.generation += 1
        logger.info("group %s: the room preemption made is given back: %s", key, why)

    def _running(self, key: g.PodKey, uid: str) -> bool:
        pod = self.view.pods.get(key)
        return (pod is not None and not g.is_finished(pod)
                and metadata_of(pod).get("uid", uid) == uid)

    # -- choosing victims ------------------------------------------------------------------

    def make_room(self, pending: g.PendingGroup, group: Group,
                  match: Match | None = None,
                  devices: DevicePlan | None = None) -> GroupMatch | None:
        """Evict the least disruptive set of lower-priority pods that lets ``group`` fit (by
        ``match``, the cycle's own way of matching it, which allocates ``devices``, the
        group's claims, in each match) and nominate it there; return its match, held with
        the devices it took. None, with nothing touched, when no such set exists."""
        matching = match if match is not None else self._match
        priority = self.priority_of(pending)
        pool = self._pool()
        if not pool.below(priority):
            return None
        level = self._required_level(group)
        if level is None and len(group.pods) > 1:
            best = self._in_cluster(group, pool, priority, matching)
        else:
            best = self._best_scope(group, level, pool, priority, matching)
        if best is None:
            return None
        return self._preempt(pending, group, best, pool, matching, devices)

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

    def _best_scope(self, group: Group, level: int | None, pool: _Pool, priority: int,
                    match: Match) -> _Candidate | None:
        """The least disruptive victims among the scopes (each domain of ``level``, or each
        node a lone pod may use), kube-scheduler's way: up to :data:`MIN_CANDIDATES` (or
        :data:`MIN_CANDIDATES_PERCENT` of the scopes) with a victim set are compared, the
        likeliest best first (lowest-priority, latest-started victims), and the search
        stops early at a set no other could beat."""
        graph = self.view.graph
        ranked: Iterable[tuple[str, frozenset[str]]]
        if level is not None:
            domains = [("/".join(domain), frozenset(n.name for n in nodes))
                       for domain, nodes in graph.domains(level).items()]
            promising = [(promise, scope, nodes) for scope, nodes in domains
                         if (promise := _promise(pool.on(nodes, priority))) is not None]
            ranked = [(scope, nodes) for _, scope, nodes in sorted(promising)]
            count = len(domains)
        else:
            allowed = group.pods[0].allowed
            ranked = ((node, frozenset((node,))) for node in pool.ranked(priority)
                      if graph.has_node(node) and not graph.node(node).down
                      and (allowed is None or node in allowed))
            count = len(graph.node_names)
        wanted = max(MIN_CANDIDATES, count * MIN_CANDIDATES_PERCENT // 100)
        floor = pool.floor()
        best: _Candidate | None = None
        found = 0
        for scope, nodes in ranked:
            candidate = self._candidate(group, scope, nodes, pool.on(nodes, priority), pool,
                                        match)
            if candidate is None:
                continue
            if best is None or candidate.cost.key() < best.cost.key():
                best = candidate
            found += 1
            if found >= wanted or best.cost.key()[:3] <= floor:
                break
        return best

    def _candidate(self, group: Group, scope: str, nodes: frozenset[str],
                   inside: list[tuple[Holder, Member]], pool: _Pool,
                   match: Match) -> _Candidate | None:
        """The least set of victims inside ``nodes`` that lets ``group`` fit there, by
        kube-scheduler's rule: every lower-priority pod there out, then the most important
        given back while the group still fits. The matcher is left as it was."""
        scoped = _within(group, nodes)
        if scoped is None:
            return None
        trial = _Trial(self.view, pool)
        try:
            units = _units(inside)
            for _, unit in units:
                trial.take(unit)
            if not self._fits(scoped, match):
                return None
            return self._reprieve(scope, nodes, scoped, units, trial, pool, match)
        finally:
            trial.undo()

    def _in_cluster(self, group: Group, pool: _Pool, priority: int,
                    match: Match) -> _Candidate | None:
        """For a group bound to no domain: lower-priority pods taken out least important
        first until the group fits, then the most important given back while it still fits
        (taking every one out first would cost a match per pod of the cluster)."""
        units = _units(pool.on(None, priority))
        units.sort(key=_importance, reverse=True)
        trial = _Trial(self.view, pool)
        try:
            taken = []
            for unit in units:
                trial.take(unit[1])
                taken.append(unit)
                if self._fits(group, match):
                    return self._reprieve("the cluster", None, group, taken, trial, pool, match)
            return None
        finally:
            trial.undo()

    def _reprieve(self, scope: str, nodes: frozenset[str] | None, group: Group,
                  units: list[tuple[Holder, tuple[Member, ...]]], trial: _Trial, pool: _Pool,
                  match: Match) -> _Candidate:
        """Give back ``units`` (all out, the group fitting) most important first, each that
        the group can do without; what stays out, with every gang it would leave below its
        ``minCount``, are the victims."""
        leaving = []
        for holder, unit in sorted(units, key=_importance):
            trial.give_back(unit)
            if not self._fits(group, match):
                trial.take(unit)
                leaving.append(unit)
        victims = pool.whole_gangs({m.key for unit in leaving for m in unit})
        return _Candidate(scope, nodes, victims, disruption(victims))

    def _fits(self, group: Group, match: Match) -> bool:
        outcome = match(group)
        if isinstance(outcome, GroupMatch):
            self.view.release_match(outcome)
            return True
        return False

    # -- evicting --------------------------------------------------------------------------

    def _preempt(self, pending: g.PendingGroup, group: Group, chosen: _Candidate,
                 pool: _Pool, match: Match, devices: DevicePlan | None) -> GroupMatch | None:
        """Take ``chosen``'s victims out, match the group in its scope, then evict them and
        nominate the group; on a miss put everything back."""
        scoped = _within(group, chosen.nodes) or group
        trial = _Trial(self.view, pool)
        trial.take(tuple(m for m, _ in chosen.victims))
        outcome = match(scoped)
        if not isinstance(outcome, GroupMatch):
            trial.undo()
            logger.warning("group %s: room in %s was found but the match missed; nothing is "
                           "evicted", group.name, chosen.scope)
            return None
        logger.info("group %s: preempting %d pod(s) in %s (highest priority %d)",
                    pending.key, len(chosen.victims), chosen.scope, chosen.cost.highest)
        victims = [m for m, _ in chosen.victims]
        held = frozenset(devices.used) if devices is not None else frozenset()
        freed = trial.keep_devices()
        if held:
            self.view.dra.hold(pending.key, held)
        self._evict(pending, trial, victims)
        pool.forget({m.key for m in victims})
        self._nominate(pending, scoped, outcome, victims, held, freed)
        return outcome

    def _evict(self, pending: g.PendingGroup, trial: _Trial, victims: list[Member]) -> None:
        """Rewrite each victim's record as the trial left it (dropped when nothing stays),
        then delete the victims."""
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
                  victims: list[Member], devices: frozenset[DeviceId],
                  freed: frozenset[ClaimKey]) -> None:
        self.nominations[pending.key] = Nomination(
            group, match, frozenset(g.pod_key(p) for p in pending.pods),
            {m.key: str(metadata_of(m.pod).get("uid") or "") for m in victims}, devices, freed)
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

    def _pool(self) -> _Pool:
        if self._victims is None:
            self._victims = _Pool(read_holders(self.records.held, self.view.pods,
                                               self.view.pod_groups, self._class_value))
        return self._victims

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


Unit = tuple[Holder, tuple[Member, ...]]
"""What may go at the least: one member, or a holder that goes only whole."""


def _units(inside: Iterable[tuple[Holder, Member]]) -> list[Unit]:
    units: list[Unit] = []
    whole: set[g.Owner] = set()
    for holder, member in inside:
        if not holder.whole:
            units.append((holder, (member,)))
        elif holder.owner not in whole:
            whole.add(holder.owner)
            units.append((holder, holder.members))
    return units


def _importance(unit: Unit) -> tuple[int, float]:
    """Most important first, as kube-scheduler gives victims back: the highest priority,
    then the longest running."""
    return (-unit[0].priority, min(m.since for m in unit[1]))


def _promise(inside: list[tuple[Holder, Member]]) -> tuple[int, float] | None:
    """Where the least disruption is likeliest, smallest first: the lowest-priority victims,
    the latest started among them (None without victims)."""
    if not inside:
        return None
    lowest = min(h.priority for h, _ in inside)
    return (lowest, -max(m.since for h, m in inside if h.priority == lowest))


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


class _Pool:
    """The holders that could lose pods this cycle, by priority, by node and by record.

    Read at a cycle's first preemption and kept up to date as victims go: a record committed
    later in the cycle belongs to a group of at least the priority of any group after it
    (groups go by priority), so it is never a victim of those.
    """

    def __init__(self, holders: Iterable[Holder]) -> None:
        self._priorities: list[int] = []
        self._holder: dict[g.PodKey, Holder] = {}
        self._on_node: dict[str, dict[g.PodKey, Member]] = {}
        self._in_record: dict[int, dict[g.PodKey, Member]] = {}
        self.owner_of: dict[int, g.Owner] = {}
        """Each record's owner, by the record's identity."""
        self._ranked: dict[int, tuple[dict[str, tuple[int, float]],
                                      list[tuple[tuple[int, float], str]]]] = {}
        """Per preemptor priority: each node's :func:`_promise`, and the nodes by it."""
        for holder in holders:
            self._add(holder)

    def _add(self, holder: Holder) -> None:
        insort(self._priorities, holder.priority)
        for member in holder.members:
            self._holder[member.key] = holder
            self._on_node.setdefault(member.node, {})[member.key] = member
            self._in_record.setdefault(id(member.record), {})[member.key] = member
            self.owner_of[id(member.record)] = holder.owner

    def below(self, priority: int) -> bool:
        """Whether any holder has a lower priority than ``priority``."""
        return bool(self._priorities) and self._priorities[0] < priority

    def floor(self) -> tuple[int, int, int]:
        """The least disruption any set below ``priority`` could cost (one pod of the lowest
        priority), but for start times."""
        return least_disruption(self._priorities[0])

    def ranked(self, priority: int) -> list[str]:
        """The nodes with members below ``priority``, the most promising first
        (:func:`_promise`); sorted once per priority and cycle, then kept up to date."""
        if priority not in self._ranked:
            promises = {}
            for node in self._on_node:
                promise = _promise(self.on(frozenset((node,)), priority))
                if promise is not None:
                    promises[node] = promise
            self._ranked[priority] = (promises, sorted((p, n) for n, p in promises.items()))
        return [node for _, node in self._ranked[priority][1]]

    def _rerank(self, nodes: set[str]) -> None:
        for priority, (promises, order) in self._ranked.items():
            for node in nodes:
                old = promises.pop(node, None)
                if old is not None:
                    order.pop(bisect_left(order, (old, node)))
                new = _promise(self.on(frozenset((node,)), priority))
                if new is not None:
                    promises[node] = new
                    insort(order, (new, node))

    def on(self, nodes: frozenset[str] | None, priority: int) -> list[tuple[Holder, Member]]:
        """The members on ``nodes`` (anywhere when None) whose holder's priority is lower than
        ``priority``."""
        where = self._on_node if nodes is None else {
            n: self._on_node[n] for n in nodes if n in self._on_node}
        found = []
        for members in where.values():
            for key, member in members.items():
                holder = self._holder[key]
                if holder.priority < priority:
                    found.append((holder, member))
        return found

    def members_of(self, record_id: int) -> Iterable[Member]:
        return self._in_record.get(record_id, {}).values()

    def whole_gangs(self, leaving: set[g.PodKey]) -> tuple[tuple[Member, int], ...]:
        """The members of ``leaving`` with every gang that would fall below its ``minCount``
        taken whole, each with its holder's priority."""
        holders = {self._holder[key].owner: self._holder[key] for key in leaving}
        victims: list[tuple[Member, int]] = []
        for holder in holders.values():
            going = holder.closure(leaving)
            victims.extend((m, holder.priority) for m in holder.members if m.key in going)
        return tuple(victims)

    def forget(self, gone: set[g.PodKey]) -> None:
        """``gone`` were evicted: their holders keep the rest, or leave when none is left."""
        holders = {self._holder[key].owner: self._holder[key] for key in gone}
        touched = {m.node for holder in holders.values() for m in holder.members}
        for holder in holders.values():
            self._priorities.pop(bisect_left(self._priorities, holder.priority))
            for member in holder.members:
                del self._holder[member.key]
                del self._on_node[member.node][member.key]
                del self._in_record[id(member.record)][member.key]
            staying = tuple(m for m in holder.members if m.key not in gone)
            if staying:
                self._add(dataclasses.replace(holder, members=staying))
        self._rerank(touched)


class _Trial:
    """Members taken out of the matcher for a dry run: each touched record holds, in the
    matcher, its allocations less what its leaving members hold (nothing once they all
    leave), and the claims reserved for leaving members alone count as free
    (:meth:`~fluence_core.dra.state.DraState.freeing`); :meth:`undo` holds every record
    as it was, and frees no claim."""

    def __init__(self, view: ClusterView, pool: _Pool) -> None:
        self.view = view
        self.pool = pool
        self._records: dict[int, HeldPlacement] = {}
        self._leaving: dict[int, set[g.PodKey]] = {}
        self._held: dict[int, dict[str, Allocation]] = {}
        self._uids: dict[g.PodKey, str] = {}
        """Each leaving member's pod uid (whose claims it may free)."""

    def take(self, members: Iterable[Member]) -> None:
        touched = set()
        for member in members:
            self._uids[member.key] = str(metadata_of(member.pod).get("uid") or "")
            self._leaving.setdefault(id(member.record), set()).add(member.key)
            self._records[id(member.record)] = member.record
            touched.add(id(member.record))
        self._apply(touched)

    def give_back(self, members: Iterable[Member]) -> None:
        touched = set()
        for member in members:
            self._uids.pop(member.key, None)
            self._leaving[id(member.record)].discard(member.key)
            touched.add(id(member.record))
        self._apply(touched)

    def undo(self) -> None:
        for leaving in self._leaving.values():
            leaving.clear()
        self._uids.clear()
        self._apply(set(self._records))

    def keep_devices(self) -> frozenset[ClaimKey]:
        """The trial stands (its members are evicted): no claim counts as free any more,
        the victims' devices being taken until the controller deallocates them; returns
        the claims it had freed."""
        dra = self.view.dra
        freed = dra.freed_by(uid for uid in self._uids.values() if uid)
        dra.freeing(frozenset())
        return freed

    def changed(self) -> list[tuple[g.Owner, HeldPlacement, dict[str, Allocation]]]:
        """Each record some member left, with what it holds now."""
        return [(self.pool.owner_of[rid], self._records[rid], self._held[rid])
                for rid, leaving in self._leaving.items() if leaving]

    def _apply(self, record_ids: set[int]) -> None:
        matcher = self.view.matcher
        for rid in record_ids:
            record = self._records[rid]
            for allocation in self._held.get(rid, record.allocations).values():
                matcher.cancel(allocation.jobid)
            everyone = list(self.pool.members_of(rid))
            leaving = [m for m in everyone if m.key in self._leaving[rid]]
            now: dict[str, Allocation] = {}
            if not leaving:
                now = dict(record.allocations)
            elif len(leaving) < len(everyone):
                for kind, allocation in record.allocations.items():
                    kept = without(allocation, leaving, self.view.graph)
                    if kept is not None:
                        now[kind] = kept
            for allocation in restore_order(now.values()):
                matcher.restore(allocation)
            self._held[rid] = now
        dra = self.view.dra
        dra.freeing(dra.freed_by(uid for uid in self._uids.values() if uid))
