"""Reservation and backfill: a group that has waited too long holds the room it will take.

Without a reservation a big gang starves behind a stream of later small pods: each node
that frees is handed to the next small pod, and the gang never sees all its room free at
once. HPC schedulers answer with a reservation and backfill (Fluxion's
``match_allocate_orelse_reserve``); this module gives every matcher that rule, through
the :class:`~fluence_core.matcher.base.Matcher` protocol alone.

A ready group that has waited ``reserve_after_seconds`` and misses, busy rather than
unsatisfiable, plans where it would go if the placements holding the room ended as their
walltimes (``activeDeadlineSeconds``) say, and holds the free part of that room with
placeholder allocations, topped up every cycle. Another group may use the room only with
a higher priority, or if all its pods end (by walltime) before the reservation starts.
The plan is written on the group's record owner
(:data:`~fluence_core.names.RESERVATION_ANNOTATION`); placeholders live in this process
only. The whole rule, step by step, is in docs/reservations.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.kube.api import ClusterAPI, KubeObject
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_group
from fluence_core.matcher.jobspec import group_jobspecs, is_compute
from fluence_core.matcher.pooled import restore_order
from fluence_core.models import Group, PodRequest
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.records import RecordBook
from fluence_core.scheduler.view import ClusterView

Match = Callable[[Group], GroupMatch | GroupMiss]


@dataclass(frozen=True)
class Room:
    """What a reservation needs on one node: whole cores, GPUs and memory chunks."""

    cores: int = 0
    gpus: int = 0
    memory_chunks: int = 0

    def __add__(self, other: "Room") -> "Room":
        return Room(self.cores + other.cores, self.gpus + other.gpus,
                    self.memory_chunks + other.memory_chunks)

    def __sub__(self, other: "Room") -> "Room":
        return Room(max(0, self.cores - other.cores), max(0, self.gpus - other.gpus),
                    max(0, self.memory_chunks - other.memory_chunks))

    def least(self, other: "Room") -> "Room":
        return Room(min(self.cores, other.cores), min(self.gpus, other.gpus),
                    min(self.memory_chunks, other.memory_chunks))

    @property
    def empty(self) -> bool:
        return not (self.cores or self.gpus or self.memory_chunks)


@dataclass
class Reservation:
    """The room held for one waiting group, and from when it is the group's."""

    key: str
    owner: g.Owner
    priority: int
    start: float | None
    """The scheduler-clock time its room is free, from the holders' walltimes; None when a
    holder has none (the room is taken as it frees, and nothing backfills into it)."""
    room: dict[str, Room]
    """Node -> what the group will take there."""
    placeholders: dict[str, list[tuple[int, Room]]] = field(default_factory=dict)
    """Node -> the jobs holding part of that room now, with what each holds."""

    def holding(self, node: str) -> Room:
        """What its placeholders hold on ``node``."""
        return sum((room for _, room in self.placeholders.get(node, ())), Room())

    def describe(self) -> str:
        """Where, for the group's waiting reason: stable while the plan is (the reason is
        posted again whenever it changes)."""
        nodes = ", ".join(f"{node}({room.cores} cores)" for node, room in sorted(self.room.items()))
        how = ("taken as its holders end" if self.start is None
               else "backfilled until its holders' walltimes end")
        return f"room reserved on {nodes}, {how}"


@dataclass(frozen=True)
class _Holder:
    """A placement that holds room: when it ends (None: no walltime) and its jobs."""

    end: float | None
    started: float
    jobids: tuple[int, ...]
    nodes: frozenset[str]


_Plan = tuple[float | None, dict[str, Room]]
"""When a reservation starts (None: unknown) and its room per node."""


class Reservations:
    """The reservations of the waiting groups, and who may use their room."""

    def __init__(self, view: ClusterView, records: RecordBook, cluster: ClusterAPI,
                 clock: Callable[[], float], wait: float, depth: int = 16,
                 wall: Callable[[], float] = time.time) -> None:
        self.view = view
        self.records = records
        self.cluster = cluster
        self.clock = clock
        self.wait = wait
        """Seconds a group waits before it reserves (0: never)."""
        self.depth = depth
        """How many groups may hold a reservation at once."""
        self.wall = wall
        """Wall-clock seconds, to read a pod's ``status.startTime`` on the scheduler's clock."""
        self.by_group: dict[str, Reservation] = {}
        self._since: dict[str, float] = {}
        """Group key -> when it was first seen pending."""
        self._bound_at: dict[g.PodKey, float] = {}
        """When this scheduler placed each pod (or first saw it hold room): its start, until
        the kubelet says (``status.startTime``)."""
        self._asked: set[str] = set()
        """Groups that tried to reserve at least once."""

    # -- the cycle's hooks ----------------------------------------------------------------

    def begin(self, pending: Iterable[g.PendingGroup], also_waiting: Iterable[str] = ()) -> None:
        """A new cycle over ``pending``: forget groups no longer pending (giving their room
        back) and top up every reservation with the room freed since the last cycle.
        ``also_waiting`` are the keys of groups still pending but set aside this cycle
        (lone pods that failed while nothing changed): they keep their wait and their room."""
        now = self.clock()
        keys = set(also_waiting)
        for group in pending:
            keys.add(group.key)
            self._since.setdefault(group.key, now)
        for key in [k for k in self._since if k not in keys]:
            del self._since[key]
            self._asked.discard(key)
        for key in [k for k in self.by_group if k not in keys]:
            self.drop(key)
        if len(self._bound_at) > 2 * len(self.view.pods) + 100:  # forget pods that are gone
            self._bound_at = {k: t for k, t in self._bound_at.items() if k in self.view.pods}
        if self.by_group:
            free = self._free()
            for reservation in self._in_order():
                self._top_up(reservation, free)

    def _in_order(self) -> list[Reservation]:
        """The reservations in the queue's order (priority, then how long they waited): an
        earlier one is topped up first when room frees."""
        return sorted(self.by_group.values(),
                      key=lambda r: _rank(r.priority, self._since.get(r.key, 0.0), r.key))

    def due(self, key: str) -> bool:
        """The group has waited long enough to reserve and has not tried yet: its first try
        does not wait out its backoff (room freed meanwhile would go to a later pod)."""
        return self._waited(key) and key not in self._asked

    def _waited(self, key: str) -> bool:
        since = self._since.get(key)
        return self.wait > 0 and since is not None and self.clock() - since >= self.wait

    def whole(self, key: str) -> bool:
        """The group's reserved room is all held: it is tried at once, past its backoff."""
        reservation = self.by_group.get(key)
        if reservation is None:
            return False
        for node, room in reservation.room.items():
            short = room - reservation.holding(node)
            if short.cores or short.gpus:
                return False
        return True

    @contextmanager
    def attempt(self, pending: g.PendingGroup) -> Iterator[None]:
        """Around one group's attempt: the reserved room it may use is given back to the
        matcher first and held again after (less what the group took)."""
        usable = [r for r in self.by_group.values() if self._may_use(pending, r)]
        for reservation in usable:
            self._release(reservation)
        try:
            yield
        finally:
            still = [r for r in usable if self.by_group.get(r.key) is r]
            if still:
                free = self._free()
                for reservation in still:
                    self._top_up(reservation, free)

    def placed(self, pending: g.PendingGroup) -> None:
        """``pending`` was committed: its reservation, if any, is done, and its pods start."""
        now = self.clock()
        for pod in pending.pods:
            self._bound_at[g.pod_key(pod)] = now
        if pending.key in self.by_group:
            logger.info("group %s is placed in its reserved room", pending.key)
            self.drop(pending.key)

    def reserve(self, pending: g.PendingGroup, group: Group, match: Match) -> str | None:
        """``group`` missed: if it has waited long enough, plan its reservation (again) and
        hold what is free of it. Returns what it holds, for the group's waiting reason."""
        if not self._waited(pending.key):
            return None
        self._asked.add(pending.key)
        previous = self.by_group.pop(pending.key, None)
        if previous is not None:
            self._release(previous)
        elif not self._room_in_depth(pending):
            return None
        ahead = [r for r in self._in_order() if not self._may_use(pending, r)]
        planned = self._plan(group, match, previous, ahead)
        if planned is None:
            logger.info("group %s cannot reserve: it would not fit even with every placement "
                        "it may wait for gone", pending.key)
            if previous is not None:
                self._write(previous.owner, None)
            return None
        start, room = planned
        reservation = Reservation(pending.key, g.record_owner(pending), pending.priority, start,
                                  room)
        self.by_group[pending.key] = reservation
        self._top_up(reservation, self._free())
        if previous is None or previous.room != room or previous.start != start:
            when = "unknown" if start is None else f"in {max(0.0, start - self.clock()):.0f}s"
            logger.info("group %s has waited %.0fs: %s; it starts %s", pending.key,
                        self.clock() - self._since[pending.key], reservation.describe(), when)
            self._write(reservation.owner, reservation)
        return reservation.describe()

    def _room_in_depth(self, pending: g.PendingGroup) -> bool:
        """Whether ``pending`` may reserve under the depth: there is room, or it comes before
        the last reservation in the queue's order, which gives up its own."""
        if len(self.by_group) < self.depth:
            return True
        last = self._in_order()[-1]
        if _rank(pending.priority, self._since.get(pending.key, 0.0), pending.key) >= _rank(
                last.priority, self._since.get(last.key, 0.0), last.key):
            return False
        logger.info("group %s gives up its reservation to %s, ahead of it in the queue",
                    last.key, pending.key)
        self.drop(last.key)
        return True

    def drop(self, key: str) -> None:
        """Give a reservation's room back and forget it."""
        reservation = self.by_group.pop(key, None)
        if reservation is not None:
            self._release(reservation)
            self._write(reservation.owner, None)

    # -- who may use reserved room ---------------------------------------------------------

    def _may_use(self, pending: g.PendingGroup, reservation: Reservation) -> bool:
        if reservation.key == pending.key or pending.priority > reservation.priority:
            return True
        if reservation.start is None:
            return False
        longest = walltime_of(pending.pods)
        return longest is not None and self.clock() + longest <= reservation.start

    # -- planning ---------------------------------------------------------------------------

    def _plan(self, group: Group, match: Match, previous: Reservation | None,
              ahead: list[Reservation]) -> _Plan | None:
        """Where ``group`` goes once the fewest first-ending holders are gone, and when.

        A group that reserved before keeps its nodes while it still fits there, unless
        another plan starts earlier by the walltimes: planned afresh each time, the room
        moved as holders came and went, and what was already held for it was given up.
        Room the reservations ``ahead`` of it will take is not room it can plan on: in each
        try, what the cancelled holders free goes to them first."""
        holders = sorted(self._holders(), key=lambda h: (h.end is None, h.end or 0.0, h.started))
        kept = None
        if previous is not None:
            nodes = frozenset(previous.room)
            kept = self._search(_within(group, nodes), match,
                                [h for h in holders if h.nodes & nodes], ahead)
            if kept is not None and kept[0] is None:
                return kept  # its start is unknown either way: the room it has stays
        fresh = self._native(group, holders, ahead)
        if fresh is None:
            fresh = self._search(group, match, holders, ahead)
        if kept is None or (fresh is not None and fresh[0] is not None
                            and kept[0] is not None and fresh[0] < kept[0]):
            return fresh
        return kept

    def _native(self, group: Group, holders: list[_Holder], ahead: list[Reservation]
                ) -> _Plan | None:
        """The plan of a matcher that reserves by its own rule
        (:class:`~fluence_core.matcher.base.ReservationPlanner`: Fluxion's
        ``match_allocate_orelse_reserve``), or None: no such matcher, a group it cannot be
        asked for (topology levels, virtual resources, shared pods), or no start it can see
        (a holder without a walltime is in the way)."""
        matcher = self.view.matcher
        planner = getattr(matcher, "plan_reservation", None)
        if planner is None or group.topology.required or group.virtual_types or any(
                pod.shared for pod in group.pods) or all(h.end is None for h in holders):
            return None  # (with no walltime anywhere it could see no start)
        now = self.clock()
        blocked = {node for r in ahead for node in r.room}
        remaining: dict[int, int] = {}
        for holder in holders:
            if holder.end is not None and not holder.nodes & blocked:
                for jobid in holder.jobids:
                    remaining[jobid] = max(1, math.ceil(holder.end - now))
        holding = getattr(matcher, "vertex_allocations", matcher.allocations)()
        holds = [
            _hold_jobspec(share.node, len(share.cores), len(share.gpus), self.view.graph,
                          remaining.get(jobid, 0))
            for jobid, allocation in holding.items() for share in allocation.nodes
            if share.cores or share.gpus
        ]
        wanted = [dict(j.jobspec, attributes={"system": {
            **j.jobspec["attributes"]["system"], "duration": 1}})
            for j in group_jobspecs(group, self.view.graph) if is_compute(j.kind)]
        try:
            planned = planner(holds, wanted)
        except FluenceError as error:
            logger.warning("the matcher could not plan a reservation for %s: %s", group.name,
                           error)
            return None
        if planned is None:
            return None
        at, allocations = planned
        return now + at, _room_of(allocations)

    def _search(self, group: Group, match: Match, holders: list[_Holder],
                ahead: list[Reservation]) -> _Plan | None:
        """The fewest of ``holders`` (in the order they end) whose end lets ``group`` fit:
        galloping, then bisecting, each try a match with them cancelled; all restored."""
        matcher = self.view.matcher
        held = matcher.allocations()
        gone: list[Allocation] = []

        def cancel_up_to(count: int) -> None:
            """Cancel exactly the first ``count`` holders (restoring any past it)."""
            wanted = {j for h in holders[:count] for j in h.jobids if j in held}
            back = [a for a in gone if a.jobid not in wanted]
            for allocation in restore_order(back):
                matcher.restore(allocation)
            kept = [a for a in gone if a.jobid in wanted]
            for jobid in sorted(wanted - {a.jobid for a in kept}):
                matcher.cancel(jobid)
                kept.append(held[jobid])
            gone[:] = kept

        def fits(count: int) -> dict[str, Room] | None:
            cancel_up_to(count)
            before = {id(r): {n: len(j) for n, j in r.placeholders.items()} for r in ahead}
            free = self._free()
            for reservation in ahead:
                self._top_up(reservation, free)
            try:
                outcome = match(group)
                if not isinstance(outcome, GroupMatch):
                    return None
                room = _room_of(outcome.allocations.values())
                self.view.release_match(outcome)
                return room
            finally:
                for reservation in ahead:  # what they took of the cancelled holders' room
                    counts = before[id(reservation)]
                    for node, holds in reservation.placeholders.items():
                        for jobid, _ in holds[counts.get(node, 0):]:
                            matcher.cancel(jobid)
                        del holds[counts.get(node, 0):]

        try:
            low, high = 0, 1  # it missed with none gone (low); gallop: 1, 2, 4, ... gone
            while True:
                high = min(high, len(holders))
                found = fits(high) if high > low else None
                if found is not None:
                    break
                if high >= len(holders):
                    return None
                low, high = high, 2 * high
            while high - low > 1:  # the fewest holders gone that still let it fit
                middle = (low + high) // 2
                room = fits(middle)
                if room is None:
                    low = middle
                else:
                    high, found = middle, room
            needed = holders[:high]
        finally:
            cancel_up_to(0)
        start = None if any(h.end is None for h in needed) else max(
            (h.end for h in needed if h.end is not None), default=self.clock())
        return start, found

    def _holders(self) -> list[_Holder]:
        """Every held record and pin, with when it ends."""
        now = self.clock()
        held = self.view.matcher.allocations()
        found = []
        for (_, namespace, _), records in self.records.held.items():
            for record in records:
                pods = [p for p in (self.view.pods.get((namespace, name)) for name in record.pods)
                        if p is not None and not g.is_finished(p)]
                if pods and record.jobids:
                    found.append(self._holder(pods, tuple(record.jobids), held, now))
        for key, pin in self.view.pins.items():
            pod = self.view.pods.get(key)
            if pod is not None and pin.jobids:
                found.append(self._holder([pod], pin.jobids, held, now))
        return found

    def _holder(self, pods: list[KubeObject], jobids: tuple[int, ...],
                held: Mapping[int, Allocation], now: float) -> _Holder:
        ends: list[float | None] = []
        starts = []
        for pod in pods:
            started = self._started(pod, now)
            starts.append(started)
            deadline = walltime(pod)
            ends.append(None if deadline is None else started + deadline)
        known = [e for e in ends if e is not None]
        end = None if len(known) < len(ends) else max(known)
        nodes = frozenset(s.node for j in jobids if j in held for s in held[j].nodes)
        return _Holder(end, min(starts), jobids, nodes)

    def _started(self, pod: KubeObject, now: float) -> float:
        """When the pod started, on the scheduler's clock."""
        stamp = (pod.get("status") or {}).get("startTime")
        if stamp:
            try:
                when = datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=timezone.utc).timestamp()
                return now - max(0.0, self.wall() - when)
            except ValueError:
                logger.warning("pod %s/%s: unreadable status.startTime %r", *g.pod_key(pod),
                               stamp)
        return self._bound_at.setdefault(g.pod_key(pod), now)

    # -- holding ------------------------------------------------------------------------------

    def _top_up(self, reservation: Reservation, free: dict[str, Room]) -> None:
        """Hold what is ``free`` of the reservation's room and not held for it yet; what it
        takes is no longer free."""
        for node, room in reservation.room.items():
            wanted = (room - reservation.holding(node)).least(free.get(node, Room()))
            if wanted.cores == 0 and wanted.gpus == 0:
                continue  # memory alone would be drawn from the shared pool, not held
            jobids = self._hold(reservation.key, node, wanted)
            if jobids:
                reservation.placeholders.setdefault(node, []).append((jobids[0], wanted))
                for extra in jobids[1:]:
                    reservation.placeholders[node].append((extra, Room()))
                free[node] = free[node] - wanted

    def _free(self) -> dict[str, Room]:
        """Whole cores, GPUs and memory chunks no allocation holds, per node."""
        matcher: Matcher = self.view.matcher
        vertex_allocations = getattr(matcher, "vertex_allocations", matcher.allocations)
        held = _room_of(vertex_allocations().values())
        return {n.name: Room(n.cores, n.gpus, n.memory_chunks) - held.get(n.name, Room())
                for n in self.view.graph.nodes}

    def _hold(self, key: str, node: str, room: Room) -> list[int]:
        graph = self.view.graph
        if not graph.has_node(node):
            return []
        vertex = graph.node(node)
        placeholder = PodRequest(f"reserved-{node}", cores=room.cores, gpus=room.gpus,
                                 memory_mib=room.memory_chunks * vertex.chunk_mib,
                                 allowed=frozenset((node,)))
        try:
            outcome = match_group(Group(f"reservation:{key}", (placeholder,)), graph,
                                  self.view.matcher)
        except FluenceError as error:
            logger.warning("group %s: cannot hold its reserved room on %s: %s", key, node, error)
            return []
        if not isinstance(outcome, GroupMatch):
            logger.debug("group %s: the free room on %s could not be held: %s", key, node,
                         outcome.reason)
            return []
        return outcome.jobids

    def _release(self, reservation: Reservation) -> None:
        for holds in reservation.placeholders.values():
            for jobid, _ in holds:
                self.view.matcher.cancel(jobid)
        reservation.placeholders.clear()

    # -- shown --------------------------------------------------------------------------------

    def _write(self, owner: g.Owner, reservation: Reservation | None) -> None:
        if self.records.read_only:
            return
        value = None if reservation is None else json.dumps(
            reservation_record(reservation, self.clock(), self.wall()), sort_keys=True)
        resource, namespace, name = owner
        try:
            self.cluster.patch(resource, name, {"metadata": {"annotations": {
                names.RESERVATION_ANNOTATION: value}}}, namespace)
        except ApiError as error:  # shown only: the reservation holds without it
            logger.debug("could not write the reservation on %s/%s/%s: %s", *owner, error)


def _rank(priority: int, since: float, key: str) -> tuple[int, float, str]:
    """A group's place in the queue: highest priority first, then the longest waiting."""
    return (-priority, since, key)


def walltime(pod: KubeObject) -> float | None:
    """The pod's walltime: ``spec.activeDeadlineSeconds``, or None when it has none."""
    value = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def walltime_of(pods: Iterable[KubeObject]) -> float | None:
    """The longest walltime of ``pods``, or None when one of them has none."""
    longest = 0.0
    for pod in pods:
        own = walltime(pod)
        if own is None:
            return None
        longest = max(longest, own)
    return longest


def reservation_record(reservation: Reservation, now: float, wall_now: float
                       ) -> dict[str, object]:
    """What :data:`~fluence_core.names.RESERVATION_ANNOTATION` holds: the room per node and
    when it starts, in wall-clock time (RFC 3339; null when its holders have no walltime)."""
    start = None
    if reservation.start is not None:
        at = wall_now + max(0.0, reservation.start - now)
        start = datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"start": start, "nodes": {node: dataclasses.asdict(room)
                                      for node, room in sorted(reservation.room.items())}}


def _hold_jobspec(node: str, cores: int, gpus: int, graph: ResourceGraph, seconds: int
                  ) -> dict[str, object]:
    """A jobspec holding ``cores`` and ``gpus`` of ``node`` for ``seconds`` (0: for good)."""
    request = PodRequest(f"held-{node}", cores=cores, gpus=gpus, allowed=frozenset((node,)))
    jobspec = next(j.jobspec for j in group_jobspecs(Group("held", (request,)), graph)
                   if is_compute(j.kind))
    return dict(jobspec, attributes={"system": {**jobspec["attributes"]["system"],
                                                "duration": seconds}})


def _within(group: Group, nodes: frozenset[str]) -> Group:
    """``group`` with each pod held to ``nodes`` (and to the nodes it may use anyway)."""
    return dataclasses.replace(group, pods=tuple(
        dataclasses.replace(pod, allowed=nodes if pod.allowed is None else pod.allowed & nodes,
                            preferred=())
        for pod in group.pods))


def _room_of(allocations: Iterable[Allocation]) -> dict[str, Room]:
    room: dict[str, Room] = {}
    for allocation in allocations:
        for share in allocation.nodes:
            room[share.node] = room.get(share.node, Room()) + Room(
                len(share.cores), len(share.gpus), len(share.memory))
    return {node: r for node, r in room.items() if not r.empty}
