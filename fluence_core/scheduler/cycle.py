"""One scheduling cycle: the pending groups in order, each matched all-or-nothing.

For each group that is ready and may have a chance (something changed since it
last failed and its backoff has expired, no binding of its record owner in
flight), an attempt runs
prefilter -> feasibility (Kubernetes' filters give each pod its nodes) -> match -> filter ->
(postfilter, rematch, preemption) -> reserve ->
prebind, then hands the committed group to the :class:`Binder`. A failure at
any step after the match gives the allocation back.

The match happens in :meth:`Cycle.match`, on nodes :class:`FeasibleNodes` already
narrowed to those Kubernetes' filters accept for each pod.

The groups are taken by priority, the namespaces in turns within one
(:mod:`~fluence_core.scheduler.tenants`). A cycle that has run
``FLUENCE_CYCLE_BUDGET_SECONDS`` ends early once new pods have arrived
(:attr:`Cycle.arrived`): the groups it did not reach stay pending, untouched, and
the next cycle, which sees the new pods, takes them with the others in order. So
a pass over a long backlog never keeps a newly arrived pod from being looked at
for longer than the budget and one attempt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from fluence_core.kube.api import (
    PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, ClusterAPI,
)
from fluence_core.dra.plan import DevicePlan, NotMadeYet, plan_group
from fluence_core.scheduler.joint import joint_match
from fluence_core.errors import FluenceError
from fluence_core.feasibility import nodes_to_find
from fluence_core.log import logger
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_preferring
from fluence_core.matcher.base import MatchOutcome
from fluence_core.models import Group
from fluence_core.plugins import FluencePluginManager
from fluence_core.scheduler import groups as g
from fluence_core.scheduler import podset_groups
from fluence_core.scheduler.binder import Binder, Commit, CycleResult, Reporter
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.scheduler.feasible import FeasibleNodes, Storage, filters_of
from fluence_core.scheduler.members import MemberPlacer, entangled
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.preempt import Preemptor
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.reservations import Reservations
from fluence_core.scheduler.tenants import in_turns
from fluence_core.scheduler.view import ClusterView
from fluence_core.settings import Settings


class Cycle:
    """Places the pending groups of a :class:`ClusterView`, through the hooks."""

    def __init__(self, settings: Settings, manager: FluencePluginManager, view: ClusterView,
                 records: RecordBook, binder: Binder, reporter: Reporter,
                 preemptor: Preemptor, metrics: SchedulerMetrics,
                 reservations: Reservations | None = None) -> None:
        self.settings = settings
        self.manager = manager
        self.view = view
        self.records = records
        self.binder = binder
        self.cluster = binder.cluster
        """Where the hooks write (the cluster the binder binds in)."""
        self.reporter = reporter
        self.preemptor = preemptor
        self.metrics = metrics
        self.reservations = reservations or Reservations(
            view, records, binder.cluster, reporter.clock,
            settings.scheduling.reserve_after_seconds, settings.scheduling.reserve_depth)
        """Room held for groups that waited too long, and who may backfill into it."""
        contributed = manager.hook.fluence_feasibility_filters(settings=settings)
        scores = [s for found in manager.hook.fluence_score_plugins(settings=settings)
                  for s in found or ()]
        self.feasible = FeasibleNodes(view, filters_of(contributed), lambda: binder.in_flight,
                                      lambda: _storage(binder.cluster), scores,
                                      settings.scheduling.preference_tiers,
                                      settings.scheduling.percentage_of_nodes_to_score)
        """Kubernetes' filters: the nodes each pod may use, handed to the matcher."""
        self.members = MemberPlacer(self.feasible)
        """Places a gang whose members constrain each other one member after another."""
        self.devices: DevicePlan | None = None
        """The claims of the group being attempted (None: it uses none), allocated in its
        match (:mod:`fluence_core.dra.plan`)."""
        self._device_start = 0
        """Where the next check of a lone pod's claims over the nodes starts (each starts
        where the last stopped, as kube-scheduler's search for feasible nodes does)."""
        self._device_scan = 0
        """How many nodes the last such check asked."""
        self.arrived: Callable[[], bool] = lambda: False
        """Whether pods arrived that this cycle does not see (set by the scheduler's loop):
        past its budget, the cycle ends so the next one takes them."""

    def schedule_once(self) -> list[CycleResult]:
        """One pass over the pending groups, in order; returns what each attempt came to."""
        view = self.view
        with view.lock:
            self.binder.settle()
            self.feasible.begin()
            self.preemptor.begin()
            in_flight = self.binder.in_flight
            parked = self.reporter.unschedulable.at(view.generation)
            unplaced = (p for k, p in view.unplaced.items()
                        if k not in in_flight and k not in parked)
            held = self.records.held_members(view.alive)
            pending = in_turns(g.pending_groups(unplaced, view.pod_groups, held,
                                                view.workloads))
            still = [f"{k[0]}/{k[1]}" for k in parked if k in view.unplaced]
            self.metrics.pending_groups.set(len(pending) + len(still))
            backoff = self.reporter.backoff
            keys = {group.key for group in pending}.union(still)
            self.preemptor.keep_only(group.key for group in pending if group.ready)
            backoff.keep_only(keys)
            self.reporter.arrivals.keep_only(keys)
            reservations = self.reservations
            reservations.begin(pending, also_waiting=still)
            results: list[CycleResult] = []
            started = self.reporter.clock()
            for reached, group in enumerate(podset_groups.join(pending)):
                if results and self._over_budget(started):  # one attempt at least
                    logger.debug("cycle ends after %d of %d groups: new pods arrived",
                                 reached, len(pending))
                    break
                self.reporter.seen(group.key)
                if not group.ready:
                    self.reporter.tell_arriving(group, group.waiting or "waiting")
                    for fellow in group.fellows:
                        self.reporter.tell_arriving(fellow, _with_fellow(group))
                    continue
                self.reporter.arrivals.forget(group.key)
                if self.reporter.failed_at.get(group.key) == view.generation:
                    continue  # nothing changed since it failed
                if not (backoff.ready(group.key) or reservations.due(group.key)
                        or reservations.whole(group.key)):
                    continue  # it waits out its backoff; reservations: scheduler/reservations.py
                if self.binder.busy(g.record_owner(group)):
                    continue
                try:
                    with reservations.attempt(group):
                        results.append(self.attempt(group))
                except Exception as error:  # one bad group never stops the loop
                    logger.exception("group %s: the attempt failed", group.key)
                    results.append(self._fail(pending=group, reason=f"internal error: {error}",
                                              result="error"))
            return results

    def _over_budget(self, started: float) -> bool:
        """Whether the cycle begun at ``started`` has run its budget and new pods wait."""
        budget = self.settings.scheduling.cycle_budget_seconds
        return budget > 0 and self.reporter.clock() - started >= budget and self.arrived()

    def context(self) -> SchedulingContext:
        """What the hooks see of this attempt."""
        view = self.view
        return SchedulingContext(settings=self.settings, graph=view.graph, matcher=view.matcher,
                                 cluster=self.cluster, pods_on=view.pods_on)

    def attempt(self, pending: g.PendingGroup) -> CycleResult:
        """Place one ready group, or say why it waits."""
        try:
            return self._attempt(pending)
        finally:
            self.devices = None

    def _attempt(self, pending: g.PendingGroup) -> CycleResult:
        ctx = self.context()
        fellowship = podset_groups.fellowship_of(pending) if pending.pod_group else None
        if fellowship is not None:
            absent = podset_groups.absent_fellows(pending, fellowship, self.view.pods,
                                                  self.view.pod_groups)
            if absent:
                why = (f"waits for gang {absent[0]} of its group of PodSets, placed together: "
                       "it has no pods yet")
                self.reporter.tell_waiting(pending, why)  # ready itself: told at once
                for member in pending.fellows:
                    self.reporter.tell_arriving(member, why)
                return CycleResult(pending.key, reason=why)
        if pending.fellows:
            return self._attempt_together(pending, ctx)
        nominated = self._nominated(pending, ctx)
        if nominated is not None:
            return nominated
        try:
            group = pending.requests()
        except ValueError as error:
            return self._fail(pending, f"cannot read the pods' requests: {error}", "error")
        hook = self.manager.hook
        veto = hook.fluence_prefilter(group=group, ctx=ctx)
        if veto:
            return self._fail(pending, f"prefilter: {veto}", "vetoed")
        self.view.backends.sync(self.view.graph, self.view.matcher)
        devices = plan_group(self.view.dra, pending.pods, self.view.nodes)
        if isinstance(devices, str):
            return self.reporter.fail(pending, devices, "unschedulable", self.view.generation,
                                      backoff=not isinstance(devices, NotMadeYet))
        self.devices = devices
        asked = group
        constrained = self._near_fellows(pending, self.feasible.constrain(group, pending.pods))
        if isinstance(constrained, str):
            return self._fail(pending, constrained, "unschedulable")
        group = constrained
        try:
            outcome = self.match(group)
            if isinstance(outcome, GroupMiss) and self.feasible.partial:
                # the search stopped at enough feasible nodes, but the graph had no room on
                # them: every node is asked before the pod waits or preempts
                widened = self._near_fellows(
                    pending, self.feasible.constrain(asked, pending.pods, every_node=True))
                if isinstance(widened, str):
                    return self._fail(pending, widened, "unschedulable")
                group = widened
                outcome = self.match(group)
        except FluenceError as error:
            return self._fail(pending, str(error), "error")
        vetoed, ctx = self._filtered(group, outcome, ctx)
        if isinstance(outcome, GroupMatch) and vetoed:
            outcome = GroupMiss(group, "compute", MatchOutcome.BUSY, [])
        if isinstance(outcome, GroupMiss):
            ctx = dataclasses.replace(ctx, vetoed=sorted(vetoed))
            reason = _veto_reason(vetoed) or outcome.reason
            exclude = hook.fluence_postfilter(group=group, reason=reason, ctx=ctx)
            if exclude is not None:
                outcome = self.match(group, exclude=sorted(set(exclude) | set(vetoed)))
                again, ctx = self._filtered(group, outcome, ctx)
                if isinstance(outcome, GroupMatch) and again:
                    outcome = GroupMiss(group, "compute", MatchOutcome.BUSY, [])
                vetoed.update(again)
            if (isinstance(outcome, GroupMiss)
                    and self.preemptor.make_room(pending, group, self.match,
                                                 self.devices) is not None):
                return self._nominated(pending, ctx) or self._fail(
                    pending, "preemption made room but holds none", "error")
            if isinstance(outcome, GroupMiss):
                why = (_veto_reason(vetoed) or outcome.detail
                       or self.feasible.explain(pending.pods) or outcome.reason)
                reserved = (self.reservations.reserve(pending, group, self.match)
                            if outcome.outcome is MatchOutcome.BUSY else None)
                return self._fail(pending, f"{why}; {reserved}" if reserved else why,
                                  "unschedulable")
        return self._commit(pending, group, outcome, ctx)

    def _near_fellows(self, pending: g.PendingGroup, group: Group | str) -> Group | str:
        """A gang of a group of PodSets whose fellows were placed before it, held to their
        domain (:func:`~fluence_core.scheduler.podset_groups.pinned_domain`); any other
        group as it is."""
        if isinstance(group, str) or pending.pod_group is None:
            return group
        fellowship = podset_groups.fellowship_of(pending)
        if fellowship is None:
            return group
        view = self.view
        placed = podset_groups.placed_fellow_nodes(pending, fellowship, view.pods,
                                                   view.pod_groups, view.node_of)
        domain = podset_groups.pinned_domain(view.graph, group.topology, placed)
        if domain is None:
            return group
        logger.debug("group %s: held to the domain of its %s on %s", pending.key,
                     podset_groups.describe(fellowship), placed[0])
        return podset_groups.pinned(group, domain)

    def _attempt_together(self, lead: g.PendingGroup, ctx: SchedulingContext) -> CycleResult:
        """Place the gangs of one group of PodSets (``lead`` and its fellows) all or none:
        one joint match chooses the domain and each pod's node, then each gang is matched on
        the nodes its pods got there and committed as its own (module
        :mod:`~fluence_core.scheduler.podset_groups`)."""
        members = [lead, *lead.fellows]
        fellowship = podset_groups.fellowship_of(lead)
        together = podset_groups.describe(fellowship) if fellowship else "group of PodSets"

        def fail_all(reason: str, result: str) -> CycleResult:
            for member in members[1:]:
                self._fail(member, f"{together}: {reason}", result)
            return self._fail(lead, f"{together}: {reason}", result)

        waiting = next((m for m in members if not m.ready), None)
        if waiting is not None:
            self.reporter.tell_waiting(lead, _with_fellow(waiting))  # ready itself
            for member in members[1:]:
                self.reporter.tell_arriving(member, waiting.waiting or "waiting"
                                            if member is waiting else _with_fellow(waiting))
            return CycleResult(lead.key, reason=waiting.waiting)
        try:
            groups = [member.requests() for member in members]
        except ValueError as error:
            return fail_all(f"cannot read the pods' requests: {error}", "error")
        common = podset_groups.common_constraint(members, groups)
        if isinstance(common, str):
            return fail_all(common, "unschedulable")
        for member, group in zip(members, groups, strict=True):
            veto = self.manager.hook.fluence_prefilter(group=group, ctx=ctx)
            if veto:
                return fail_all(f"prefilter: {veto} (gang {member.key})", "vetoed")
            if plan_group(self.view.dra, member.pods, self.view.nodes) is not None:
                return fail_all(f"gang {member.key} uses resource claims, which a group of "
                                "PodSets cannot hold yet", "unschedulable")
        pods = [pod for member in members for pod in member.pods]
        joint = self.feasible.constrain(Group(
            lead.key, tuple(r for group in groups for r in group.pods), lead.namespace,
            common), pods)
        if isinstance(joint, str):
            return fail_all(joint, "unschedulable")
        try:
            outcome = self.match(joint)
        except FluenceError as error:
            return fail_all(str(error), "error")
        if isinstance(outcome, GroupMiss):
            return fail_all(outcome.detail or outcome.reason, "unschedulable")
        nodes = {key: placement.node for key, placement in outcome.placements.items()}
        self.view.release_match(outcome)
        shares: list[Group] = []
        start = 0
        for group in groups:
            shares.append(dataclasses.replace(
                group, pods=joint.pods[start:start + len(group.pods)]))
            start += len(group.pods)
        matches: list[tuple[g.PendingGroup, Group, GroupMatch]] = []
        for member, share in zip(members, podset_groups.on_their_nodes(shares, nodes),
                                 strict=True):
            placed = self.match(share)
            vetoed, _ = self._filtered(share, placed, ctx)
            if isinstance(placed, GroupMiss) or vetoed:
                for _, _, held in matches:
                    self.view.release_match(held)
                why = (_veto_reason(vetoed) if vetoed else
                       placed.detail or placed.reason if isinstance(placed, GroupMiss) else "")
                return fail_all(f"gang {member.key} could not hold its share of the joint "
                                f"placement: {why}", "unschedulable")
            matches.append((member, share, placed))
        results = [self._commit(member, share, placed, ctx) for member, share, placed in matches]
        placed_pods = {pod: node for result in results for pod, node in result.placed.items()}
        reasons = [result.reason for result in results if result.reason]
        return CycleResult(lead.key, placed_pods, "; ".join(reasons) or None)

    def _nominated(self, pending: g.PendingGroup, ctx: SchedulingContext) -> CycleResult | None:
        """Bind a group into the room preemption made for it once its victims are gone; until
        then it waits, told why (no backoff: it goes as soon as they are). None when no room
        is held for it."""
        held = self.preemptor.claim(pending)
        if held is None:
            return None
        if isinstance(held, str):
            self.reporter.tell_waiting(pending, held)
            return CycleResult(pending.key, reason=held)
        devices = self._devices_at(pending, held.match)
        if isinstance(devices, str):
            self.view.release_match(held.match)
            self.view.generation += 1
            logger.info("group %s: the room preemption made is given back: %s",
                        pending.key, devices)
            return None  # matched as any group
        self.devices = devices
        logger.info("group %s: its victims are gone; binding into the room made", pending.key)
        return self._commit(pending, held.group, held.match, ctx)

    def _devices_at(self, pending: g.PendingGroup, match: GroupMatch) -> DevicePlan | None | str:
        """The group's claims allocated anew on the nodes its nomination holds (its victims'
        devices now free, and held for it meanwhile), or why they cannot be."""
        devices = plan_group(self.view.dra, pending.pods, self.view.nodes)
        if devices is None or isinstance(devices, str):
            return devices
        for index, pod in enumerate(pending.pods):
            if not devices.uses_claims(index):
                continue
            namespace, name = g.pod_key(pod)
            node = match.placements[f"{namespace}/{name}"].node
            if node is None:
                return f"pod {namespace}/{name} was nominated to no node"
            try:
                devices.take(index, node)
            except ValueError as error:
                return str(error)
        return devices

    def match(self, group: Group, exclude: list[str] | None = None) -> GroupMatch | GroupMiss:
        """Match ``group`` on the graph, all-or-nothing, never on the ``exclude`` nodes: its
        best preference tier first, or member by member when its members constrain each
        other (:mod:`fluence_core.scheduler.members`). A gang using claims has its devices
        matched with its cores (:mod:`fluence_core.scheduler.joint`), or, where that
        cannot be, is placed member by member, each member's devices allocated where it
        goes beside its fellow members'."""
        if self.devices is not None and len(group.pods) == 1:
            return self._match_alone(group, self.devices, exclude)
        if self.devices is not None:
            facts = self.feasible.facts_of(group)
            if facts is not None:
                if entangled(facts, self.feasible.snapshot().namespace_labels) is None:
                    joint = joint_match(group, self.devices, self.view.graph,
                                        self.view.matcher, exclude)
                    if joint is not None:
                        return joint
                return self.members.place(group, facts, exclude, devices=self.devices)
        facts = self.feasible.facts_of(group) if len(group.pods) > 1 else None
        if facts is not None:
            why = entangled(facts, self.feasible.snapshot().namespace_labels)
            if why is not None:
                logger.debug("group %s is placed member by member: %s", group.name, why)
                return self.members.place(group, facts, exclude)
        return match_preferring(group, self.view.graph, self.view.matcher, exclude_nodes=exclude)

    def _match_alone(self, group: Group, devices: DevicePlan,
                     exclude: list[str] | None) -> GroupMatch | GroupMiss:
        """A lone pod with claims: its feasible nodes narrowed to those where its claims can
        be allocated, matched as any lone pod, its devices taken on the node it got.

        As kube-scheduler stops filtering at enough feasible nodes, the claims are checked
        from where the last such check stopped until enough nodes can allocate them; when
        the match finds no room on those, every node is checked before the pod waits."""
        devices.reset()
        pod = group.pods[0]
        allowed = [node.name for node in self.view.graph.nodes
                   if pod.allowed is None or node.name in pod.allowed]
        enough = nodes_to_find(len(allowed), self.settings.scheduling.percentage_of_nodes_to_score)
        outcome: GroupMatch | GroupMiss | None = None
        for every in (False, True):
            fit = self._fitting(devices, allowed, None if every else enough)
            if fit:
                narrowed = dataclasses.replace(group, pods=(dataclasses.replace(
                    pod, allowed=fit,
                    preferred=tuple(t & fit for t in pod.preferred if t & fit)),))
                outcome = match_preferring(narrowed, self.view.graph, self.view.matcher,
                                           exclude_nodes=exclude)
                if isinstance(outcome, GroupMatch):
                    break
            if every or self._device_scan == len(allowed):
                break  # every node was asked
        if outcome is None:
            return GroupMiss(group, "compute", MatchOutcome.BUSY,
                             detail=devices.why(0, len(allowed)))
        if isinstance(outcome, GroupMiss):
            return outcome
        node = outcome.placements[pod.key].node
        if node is None:  # no compute node: nothing here can hold its devices
            self.view.release_match(outcome)
            return GroupMiss(group, "compute", MatchOutcome.BUSY,
                             detail="the pod got no node to allocate its claims on")
        devices.take(0, node)
        return GroupMatch(group, outcome.allocations, outcome.placements, outcome.level)

    def _fitting(self, devices: DevicePlan, nodes: list[str],
                 enough: int | None) -> frozenset[str]:
        """The ``nodes`` where the lone pod's claims can be allocated: all of them, or the
        first ``enough`` from where the last search stopped (:attr:`_device_scan` says how
        many were asked)."""
        if not nodes:
            self._device_scan = 0
            return frozenset()
        if enough is None:
            self._device_scan = len(nodes)
            return frozenset(n for n in nodes if devices.fits(0, n))
        start = self._device_start % len(nodes)
        fit: list[str] = []
        asked = 0
        for node in nodes[start:] + nodes[:start]:
            asked += 1
            if devices.fits(0, node):
                fit.append(node)
                if len(fit) >= enough:
                    break
        self._device_start = (start + asked) % len(nodes)
        self._device_scan = asked
        return frozenset(fit)

    def _fail(self, pending: g.PendingGroup, reason: str, result: str) -> CycleResult:
        return self.reporter.fail(pending, reason, result, self.view.generation)

    def _filtered(self, group: Group, outcome: GroupMatch | GroupMiss,
                  ctx: SchedulingContext) -> tuple[dict[str, str], SchedulingContext]:
        """Run the filter over a match; a vetoed match is given back.

        Returns node -> reason, and the context with the match's ``planned`` counts.
        """
        if not isinstance(outcome, GroupMatch):
            return {}, ctx
        planned: dict[str, int] = {}
        for placement in outcome.placements.values():
            if placement.node is not None:
                planned[placement.node] = planned.get(placement.node, 0) + 1
        ctx = dataclasses.replace(ctx, planned=planned)
        vetoed = self._filter(group, outcome, ctx)
        if vetoed:
            self.view.release_match(outcome)
        return vetoed, ctx

    def _filter(self, group: Group, match: GroupMatch, ctx: SchedulingContext) -> dict[str, str]:
        vetoed: dict[str, str] = {}
        for pod in group.pods:
            node = match.placements[pod.key].node
            if node is None or node in vetoed:
                continue
            reason = self.manager.hook.fluence_filter(pod=pod, node=node, ctx=ctx)
            if reason:
                logger.info("filter vetoed %s on %s: %s", pod.key, node, reason)
                vetoed[node] = str(reason)
        return vetoed

    def _commit(self, pending: g.PendingGroup, group: Group, match: GroupMatch,
                ctx: SchedulingContext) -> CycleResult:
        """Reserve and prebind through the hooks, hold the record, and hand over to bind."""
        hook = self.manager.hook
        placements = match.placements
        owner = g.record_owner(pending)
        record = HeldPlacement(owner[0], owner[1], owner[2],
                               [g.pod_key(p)[1] for p in pending.pods], dict(match.allocations))
        try:
            hook.fluence_reserve(group=group, placements=placements, ctx=ctx)
            extra: dict[str, str] = {}
            for contributed in hook.fluence_prebind(group=group, placements=placements, ctx=ctx):
                extra.update(contributed or {})
        except Exception as error:  # noqa: BLE001 - a failing plugin gives the allocation back
            failed = Commit(pending, group, match, owner, None, {}, ctx)
            return self.binder.abandon(failed, {}, error)
        self.records.held.setdefault(owner, []).append(record)
        claims = self.devices.writes() if self.devices is not None else []
        for change in claims:
            if change.allocation is not None:
                self.view.dra.assume(change.claim.key, change.allocation)
        if claims:
            self.view.backends.sync(self.view.graph, self.view.matcher)
        result = self.binder.bind(Commit(pending, group, match, owner, record, extra, ctx,
                                         claims))
        if result.reason is None:
            self.feasible.placed(pending.pods, placements)
            self.reservations.placed(pending)
        return result


def _storage(cluster: ClusterAPI) -> Storage:
    """What VolumeBinding reads, listed when a pod with claims is placed."""
    return (cluster.list(PERSISTENT_VOLUME_CLAIMS).items, cluster.list(PERSISTENT_VOLUMES).items,
            cluster.list(STORAGE_CLASSES).items)


def _with_fellow(waiting: g.PendingGroup) -> str:
    """Why a gang of a group of PodSets waits for another of them."""
    return (f"waits for gang {waiting.key} of its group of PodSets, placed together: "
            f"{waiting.waiting or 'not ready'}")


def _veto_reason(vetoed: Mapping[str, str]) -> str:
    return "; ".join(f"filter vetoed {node}: {why}" for node, why in sorted(vetoed.items()))
