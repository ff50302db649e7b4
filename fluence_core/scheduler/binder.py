"""Binding a placed group, and telling the cluster why a group waits.

:class:`Binder` takes a group the cycle committed (reserved, record held) and
writes its durable record (if it needs one), binds each pod and posts the events. Any failure
gives everything back: unreserve, cancel the allocation, drop the record, pin
what did bind. Binding is synchronous, or with ``workers`` > 0 runs on a thread
pool while the cycle goes on, as kube-scheduler binds asynchronously: the pods
in flight are left out of the pending groups, one binding per record owner at
a time. A binding on the pool never waits for the view's lock (a cycle over a
backlog holds it for long); what it came to is settled at the start of the next
cycle, where a failure gives its allocation back.

:class:`Reporter` is the one place that records what became of an attempt:
metrics, the retry generation, FailedScheduling events and conditions.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from fluence_core.dra import writes as claim_writes
from fluence_core.dra.plan import ClaimWrite
from fluence_core.kube.api import PODGROUPS, PODS, ClusterAPI, KubeObject
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.matcher.group import GroupMatch
from fluence_core.models import Group
from fluence_core.matcher.readback import PodPlacement
from fluence_core.plugins import FluencePluginManager
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.arrivals import ArrivalReports
from fluence_core.scheduler.backoff import Backoff, Unschedulable
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.scheduler.events import EventRecorder
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.reports import ReportWriter
from fluence_core.scheduler.view import ClusterView
from fluence_core.kube.meta import metadata_of


@dataclass
class CycleResult:
    """What one attempt at one group came to."""

    group: str
    placed: dict[str, str] = field(default_factory=dict)
    reason: str | None = None


class Reporter:
    """What became of each group: metrics, retry bookkeeping, events and conditions."""

    def __init__(self, cluster: ClusterAPI, metrics: SchedulerMetrics,
                 clock: Callable[[], float], events: EventRecorder | None = None,
                 backoff: Backoff | None = None, arrivals: ArrivalReports | None = None,
                 reports: ReportWriter | None = None) -> None:
        self.cluster = cluster
        self.backoff = backoff if backoff is not None else Backoff(clock, 0.0)
        """When each group that failed may be tried again (none waits by default)."""
        self.arrivals = arrivals if arrivals is not None else ArrivalReports(clock)
        """When a group still arriving is told why it waits (at once by default)."""
        self.events = events or EventRecorder(cluster)
        self.reports = reports if reports is not None else ReportWriter(cluster)
        """Writes the waiting groups' conditions (at once by default)."""
        self.metrics = metrics
        self.clock = clock
        self.failed_at: dict[str, int] = {}
        """Group key -> the view generation it last failed at (retried once it moves)."""
        self.unschedulable = Unschedulable()
        """The lone pods among them, which the cycle leaves out until the view moves."""
        self._told: dict[str, str] = {}
        self._first_seen: dict[str, float] = {}

    def seen(self, key: str) -> None:
        """A group is pending: its latency counts from the first time it was."""
        self._first_seen.setdefault(key, self.clock())

    def scheduled(self, pending: g.PendingGroup, bound: Mapping[str, str]) -> None:
        """A group is bound: observe its latency, forget its failures, mark its PodGroup."""
        latency = self.clock() - self._first_seen.pop(pending.key, self.clock())
        self.metrics.group_latency.observe(latency)
        self.metrics.attempts.labels(result="scheduled").inc()
        self.failed_at.pop(pending.key, None)
        if len(pending.pods) == 1:
            self.unschedulable.discard(g.pod_key(pending.pods[0]))
        self.backoff.forget(pending.key)
        self.arrivals.forget(pending.key)
        self._told.pop(pending.key, None)

    def fail(self, pending: g.PendingGroup, reason: str, result: str,
             generation: int, backoff: bool = True,
             until_change: bool = True) -> CycleResult:
        """An attempt failed at ``generation`` of the view; say why (once per reason).

        Without ``backoff`` the group is tried again as soon as the view moves (it waits
        for an object to be made, as kube-scheduler's PreEnqueue keeps a pod aside).
        Without ``until_change`` it is tried again once its backoff expires, whether or not
        the view moved: a refused write or bind is the API's trouble, not the cluster's
        shape, and kube-scheduler sends such a pod to its backoff queue, not to the
        unschedulable pool."""
        self.metrics.attempts.labels(result=result).inc()
        if not until_change:
            self.failed_at.pop(pending.key, None)
        else:
            self.failed_at[pending.key] = generation
            if len(pending.pods) == 1 and g.pod_group_name(pending.pods[0]) is None:
                self.unschedulable.add(g.pod_key(pending.pods[0]), generation)
        if backoff:
            self.backoff.failed(pending.key)
        self.tell_waiting(pending, reason)
        return CycleResult(pending.key, reason=reason)

    def tell_arriving(self, pending: g.PendingGroup, reason: str) -> None:
        """A group not ready yet (members or its PodGroup still to come): told as
        :meth:`tell_waiting` does, once :class:`ArrivalReports` says it is due."""
        if self.arrivals.due(pending.key, self._told.get(pending.key) != reason):
            self.tell_waiting(pending, reason)

    def tell_waiting(self, pending: g.PendingGroup, reason: str) -> None:
        """FailedScheduling events and PodScheduled=False, once per new reason, handed to the
        event recorder and the :class:`ReportWriter`: neither is written by the loop itself
        when they work in the background."""
        if self._told.get(pending.key) == reason:
            return
        self._told[pending.key] = reason
        logger.info("group %s waits: %s", pending.key, reason)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": reason}
        for pod in pending.pods:
            namespace, name = g.pod_key(pod)
            self.events.post(pod, "Warning", "FailedScheduling", reason)
            self.reports.write(pending.key, PODS, namespace, name,
                               {"status": {"conditions": [condition]}})
        if pending.pod_group is not None:
            namespace, name = pending.key.split("/", 1)
            self.reports.write(pending.key, PODGROUPS, namespace, name,
                               _group_condition("False", "Unschedulable", reason))

    def set_group_condition(self, pending: g.PendingGroup, status: str, reason: str,
                            message: str) -> None:
        """Set the PodGroup's PodGroupScheduled condition now (a bound group's)."""
        namespace, name = pending.key.split("/", 1)
        try:
            self.cluster.patch_status(PODGROUPS, name,
                                      _group_condition(status, reason, message), namespace)
        except ApiError as error:
            logger.debug("cannot set PodGroupScheduled on %s: %s", pending.key, error)


def _group_condition(status: str, reason: str, message: str) -> dict[str, Any]:
    """A status patch setting the PodGroupScheduled condition."""
    condition = {
        "type": "PodGroupScheduled", "status": status, "reason": reason,
        "message": message[:1000],
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return {"status": {"conditions": [condition]}}


@dataclass
class Commit:
    """A group the cycle placed and reserved, with its record already held."""

    pending: g.PendingGroup
    group: Group
    match: GroupMatch
    owner: g.Owner
    record: HeldPlacement | None
    """None when the commit failed before the record was held."""
    extra: Mapping[str, str]
    """Annotations the prebind hooks contributed for the record owner."""
    ctx: SchedulingContext
    claims: Sequence[ClaimWrite] = ()
    """The ResourceClaims to allocate and reserve before the binds (:mod:`fluence_core.dra`)."""


@dataclass
class _Outcome:
    """What binding a commit came to: the pods that bound, and the error that stopped it."""

    commit: Commit
    annotations: Mapping[str, Any]
    bound: dict[str, str] = field(default_factory=dict)
    error: Exception | None = None


class Binder:
    """Writes a committed group's record, binds its pods, or gives everything back."""

    def __init__(self, cluster: ClusterAPI, view: ClusterView, records: RecordBook,
                 manager: FluencePluginManager, reporter: Reporter, workers: int = 0) -> None:
        self.cluster = cluster
        self.view = view
        self.records = records
        self.manager = manager
        self.reporter = reporter
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="bind") if workers else None
        self._members = (ThreadPoolExecutor(workers, thread_name_prefix="bind-member")
                         if workers else None)
        """Binds a gang's members, and writes their claims, side by side (a pool of its
        own: a group's binding on ``_pool`` waits for them)."""
        self.in_flight: set[g.PodKey] = set()
        """Pods whose binding runs on the pool: not pending, not yet bound."""
        self._owners_in_flight: set[g.Owner] = set()
        self._bindings: set[Future[None]] = set()
        self._outcomes: deque[_Outcome] = deque()
        """Bindings the pool finished, for :meth:`settle` (appended without the view's lock)."""
        self.wake: Callable[[], None] = lambda: None
        """Called when a binding on the pool finished: the loop runs a cycle to settle it."""

    def busy(self, owner: g.Owner) -> bool:
        """One binding at a time per owner keeps its record writes in order."""
        return owner in self._owners_in_flight

    def bind(self, commit: Commit) -> CycleResult:
        """Bind now, or hand the binding to the pool and report the planned nodes.

        The caller holds the view's lock. A binding on the pool never takes it: the cycle
        may hold it for a long time (a backlog of a thousand pods), and the bindings
        would wait for the whole of it. Each reports to :meth:`settle` instead.
        """
        if self._pool is None:
            return self.bind_now(commit)
        pending, owner = commit.pending, commit.owner
        annotations = self._annotations(commit)
        self.in_flight.update(g.pod_key(p) for p in pending.pods)
        self._owners_in_flight.add(owner)
        future = self._pool.submit(self._bind_on_pool, commit, annotations)
        self._bindings.add(future)
        future.add_done_callback(self._bindings.discard)
        planned = {p.pod: p.node or "" for p in commit.match.placements.values()}
        return CycleResult(pending.key, placed=planned)

    def bind_now(self, commit: Commit) -> CycleResult:
        """Bind in the caller's thread (which holds the view's lock), whatever the pool: for
        work that must be done before the next cycle starts (a restored record's members, at
        start)."""
        return self._settle(self._bind_group(commit, self._annotations(commit)))

    def settle(self) -> None:
        """Apply what the pool's bindings came to (the caller holds the view's lock): bound
        pods count where they went, a failed binding gives everything back."""
        while self._outcomes:
            outcome = self._outcomes.popleft()
            self._settle(outcome)
            for pod in outcome.commit.pending.pods:
                key = g.pod_key(pod)
                self.in_flight.discard(key)
                self.view.touch(key)
            self._owners_in_flight.discard(outcome.commit.owner)

    def drain(self, timeout: float | None = None) -> None:
        """Wait for the bindings in flight (asynchronous binding only), settle them, and wait
        for their events."""
        pending = set(self._bindings)
        if pending:
            wait(pending, timeout=timeout)
        with self.view.lock:
            self.settle()
        self.reporter.events.flush(timeout)
        self.reporter.reports.flush(timeout)

    def _annotations(self, commit: Commit) -> dict[str, Any]:
        """The record owner's annotations to write before the binds (view's lock held)."""
        annotations: dict[str, Any] = dict(commit.extra)
        annotations.update(self.records.annotations(commit.owner))
        return annotations

    def _bind_on_pool(self, commit: Commit, annotations: Mapping[str, Any]) -> None:
        try:
            self._outcomes.append(self._bind_group(commit, annotations))
        finally:
            self.wake()

    def _bind_group(self, commit: Commit, annotations: Mapping[str, Any]) -> _Outcome:
        """Write the durable record and bind every pod; no lock taken, nothing given back
        here (:meth:`_settle` does that)."""
        pending, owner = commit.pending, commit.owner
        outcome = _Outcome(commit, annotations)
        self.reporter.reports.withdraw(pending.key)  # no report may say it waits once bound
        claims_written = False
        try:
            # The kubelet starts no pod whose claims are not allocated and reserved for it.
            # Claims go first: a record kept after a restart binds its members at once, so
            # it must never name members whose claims were not written.
            claim_writes.write_all(self.cluster, commit.claims, self._members)
            claims_written = True
            if annotations:  # a lone pod holding only compute has no record to write
                patch = {"metadata": {"annotations": dict(annotations)}}
                self.cluster.patch(owner[0], owner[2], patch, owner[1])
            self._bind_all(pending, commit.match.placements, outcome.bound)
        except Exception as error:  # noqa: BLE001 - any failure after the match gives it back
            outcome.error = error
            if claims_written:  # the pods that bound keep theirs: they run with them
                claim_writes.undo(self.cluster, commit.claims,
                                  {key.split("/", 1)[1] for key in outcome.bound})
            return outcome
        if pending.pod_group is not None:
            self.reporter.set_group_condition(pending, "True", "Scheduled",
                                              f"{len(outcome.bound)} pods placed by fluence")
        logger.debug("group %s bound: %s", pending.key,
                     ", ".join(f"{p}->{n}" for p, n in outcome.bound.items()))
        return outcome

    def _settle(self, outcome: _Outcome) -> CycleResult:
        """The view learns of the pods that bound; a failure gives everything back."""
        commit = outcome.commit
        for pod in commit.pending.pods:
            key = g.pod_key(pod)
            node = outcome.bound.get(f"{key[0]}/{key[1]}")
            if node is not None:
                pod["spec"]["nodeName"] = node
                self.view.assume(key, node, metadata_of(pod).get("uid"))
        if outcome.error is not None:
            return self.abandon(commit, outcome.bound, outcome.error)
        self.reporter.scheduled(commit.pending, outcome.bound)
        return CycleResult(commit.pending.key, placed=outcome.bound)

    def abandon(self, commit: Commit, bound: Mapping[str, str], error: Exception) -> CycleResult:
        """Undo a commit: unreserve, cancel the allocation, drop the record, pin what did bind."""
        self.manager.hook.fluence_unreserve(group=commit.group,
                                            placements=commit.match.placements, ctx=commit.ctx)
        self.view.release_match(commit.match)
        kept = {key.split("/", 1)[1] for key in bound}
        for change in commit.claims:
            if not any(c["name"] in kept for c in change.consumers):
                self.view.dra.forget(change.claim.key)
        records = self.records.held.get(commit.owner, [])
        if commit.record is not None and commit.record in records:
            records.remove(commit.record)
            self.records.write(commit.owner)
        for pod in commit.pending.pods:
            key = g.pod_key(pod)
            if f"{key[0]}/{key[1]}" in bound:
                self.view.pin(key, pod)  # bound before the failure: it runs there, it counts there
        if commit.record is not None:
            for name in commit.record.pods:  # members bound before this commit (a kept record)
                key = (commit.owner[1], name)
                member = self.view.pods.get(key)
                if member is not None and not self.records.covers(key, member):
                    self.view.pin(key, member)
        return self.reporter.fail(commit.pending, f"binding failed: {error}", "error",
                                  self.view.generation, until_change=False)

    def _bind_all(self, pending: g.PendingGroup, placements: Mapping[str, PodPlacement],
                  bound: dict[str, str]) -> None:
        """Bind each pod, recording in ``bound`` those that were (the view learns of them
        when the outcome is settled; until then they are in flight, never pending).

        With a pool, a gang's members are bound side by side, as kube-scheduler binds each
        pod of a gang in a goroutine of its own once the gang passed Permit: one after
        another, a gang of 1,000 took 1,000 round trips (3 minutes under load at 5,000
        nodes, ``bench_scale.py --workloads gang1000``). The first failure stops the binds
        not yet started; those in flight finish, and what bound is in ``bound``.
        """
        nodes: list[tuple[KubeObject, str, str, str]] = []
        for pod in pending.pods:
            namespace, name = g.pod_key(pod)
            node = placements[f"{namespace}/{name}"].node
            if node is None:
                raise FluenceError(f"pod {namespace}/{name} got no node")
            nodes.append((pod, namespace, name, node))
        failed: list[Exception] = []

        def one(pod: KubeObject, namespace: str, name: str, node: str) -> None:
            if failed:
                return
            try:
                self.cluster.bind(namespace, name, node, uid=metadata_of(pod).get("uid"))
            except Exception as error:  # noqa: BLE001 - raised below, after the others finish
                failed.append(error)
                if bound:
                    logger.error("gang %s partly bound (%d pods) before %s failed: %s",
                                 pending.key, len(bound), name, error)
                return
            bound[f"{namespace}/{name}"] = node
            self.reporter.events.post(pod, "Normal", "Scheduled",
                                      f"Successfully assigned {namespace}/{name} to {node}")
        if self._members is None or len(nodes) < 2:
            for each in nodes:
                one(*each)
                if failed:
                    break
        else:
            wait([self._members.submit(one, *each) for each in nodes])
        if failed:
            raise failed[0]
