"""The scheduling loop: cluster view in, bindings out, everything through the hooks.

:class:`Scheduler` wires the parts, each with one job (its docstring names them), and
runs the loop. A group that does not fit is retried only after the cluster changed (a
node came, an allocation was cancelled), never in a busy loop, so a backlog that cannot
move costs nothing.

It is driven two ways: :meth:`Scheduler.run` (threads watch the API; the loop
wakes on changes) for ``fluence up``, and :meth:`Scheduler.pump` +
:meth:`Scheduler.schedule_once` for tests and the simulator, with no threads.
Binding is synchronous by default; ``bind_workers`` > 0 binds on a pool and
posts events from a thread of their own (:mod:`~fluence_core.scheduler.events`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from fluence_core.kube.api import (
    DEVICE_CLASSES,
    NODES,
    PODGROUPS,
    PODS,
    NODE_RESOURCE_TOPOLOGIES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    WORKLOADS,
    Cancellation,
    ClusterAPI,
    KubeObject,
    Resource,
)
from fluence_core.errors import FluenceError
from fluence_core.graph import ResourceGraph, levels_for
from fluence_core.kube.errors import ApiError, NotFound
from fluence_core.log import logger
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.pooled import pooled
from fluence_core.numa import NodeNuma
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.resource_config import ResourceConfig, load_resource_config
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.arrivals import ArrivalReports
from fluence_core.scheduler.backoff import Backoff
from fluence_core.scheduler.binder import Binder, CycleResult, Reporter
from fluence_core.scheduler.cycle import Cycle
from fluence_core.scheduler.events import EventRecorder
from fluence_core.scheduler.restart.fallback import Fallback
from fluence_core.scheduler.inbox import Inbox
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.preempt import Preemptor
from fluence_core.scheduler.restart.promises import PromiseKeeper
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.reports import ReportWriter
from fluence_core.scheduler.restart.trust import distrust
from fluence_core.scheduler.view import ClusterView, read_node
from fluence_core.settings import Settings
from fluence_core.kube.meta import metadata_of, metadata_or_none

__all__ = ["WATCHED", "CycleResult", "Scheduler", "build_graph"]

WATCHED = (NODES, PODS, PODGROUPS, WORKLOADS, NODE_RESOURCE_TOPOLOGIES, RESOURCE_SLICES,
           DEVICE_CLASSES, RESOURCE_CLAIMS)
"""Workloads: a PodGroup made from one of their templates takes its topology from it.
NodeResourceTopologies: the nodes' NUMA zones (:mod:`fluence_core.numa`). ResourceSlices,
DeviceClasses and ResourceClaims: devices and the claims on them (:mod:`fluence_core.dra`).
"""
WATCH_JOIN_SECONDS = 5.0
"""How long :meth:`Scheduler.run` waits for each cancelled watch thread to end: a cancelled
watch ends at once on both clients, so only a thread stuck elsewhere is given up on."""

OPTIONAL = frozenset({NODE_RESOURCE_TOPOLOGIES.plural, RESOURCE_SLICES.plural,
                      DEVICE_CLASSES.plural, RESOURCE_CLAIMS.plural})
"""Kinds a cluster may not serve (a CRD not installed): not watched there, nothing lost."""


def build_graph(nodes: Iterable[KubeObject], config: ResourceConfig, settings: Settings,
                manager: FluencePluginManager, numa: Mapping[str, NodeNuma] | None = None,
                ) -> tuple[ResourceGraph, Matcher]:
    """The graph of ``nodes`` + ``config`` and the matcher a plugin offers for it.

    The one way a scheduler makes them, at start and on a config reload. Raises
    FluenceError when no plugin returns a matcher.
    """
    infos = [info for info in (read_node(n, numa=numa) for n in nodes) if info is not None]
    graph = ResourceGraph(infos, config,
                          memory_chunks_per_core=settings.graph.memory_chunks_per_core,
                          levels=levels_for(config, settings))
    matcher = manager.hook.fluence_matcher(settings=settings, graph=graph)
    if matcher is None:
        raise FluenceError("no plugin returned a matcher (is the embedded matcher blocked?)")
    return graph, pooled(matcher, graph)


class Scheduler:
    """Fluence's scheduler over any :class:`ClusterAPI` (real or fake). Its parts:

    * :class:`~fluence_core.scheduler.view.ClusterView` (``view.py``): caches fed by
      list+watch, the graph kept in step, foreign pods pinned, finished work released;
    * :class:`~fluence_core.scheduler.records.RecordBook` (``records.py``): the
      durable records, restored at start and written back on every change;
    * :class:`~fluence_core.scheduler.cycle.Cycle` (``cycle.py``): one pass over
      the pending groups, prefilter -> match -> filter -> postfilter -> reserve;
    * :class:`~fluence_core.scheduler.binder.Binder` (``binder.py``): the record,
      the binds and the events of a committed group, or giving it all back;
    * :class:`~fluence_core.scheduler.preempt.Preemptor` (``preempt.py``);
    * :class:`~fluence_core.scheduler.restart.promises.PromiseKeeper` (``restart/``): at
      start, binds the unbound members of restored records where they say;
    * :class:`~fluence_core.scheduler.restart.fallback.Fallback` (``restart/``): a record
      that cannot be restored or kept exactly: its bound members are held from what
      they request (never deleted), its unbound members released.
    """

    def __init__(
        self,
        cluster: ClusterAPI,
        settings: Settings,
        manager: FluencePluginManager | None = None,
        *,
        config: ResourceConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        read_only: bool = False,
        bind_workers: int = 0,
    ) -> None:
        self.cluster = cluster
        self.read_only = read_only
        """``fluence status`` rebuilds the scheduler's view without writing anything."""
        self.settings = settings
        self.manager = manager or get_plugin_manager(settings)
        self.config = (config if config is not None
                       else load_resource_config(settings.graph.resources))
        self.clock = clock
        self.metrics = SchedulerMetrics()
        self.records = RecordBook(cluster, read_only=read_only)
        self.view = ClusterView(self.records)
        self.events = EventRecorder(cluster, background=bind_workers > 0)
        """Posted from a thread of their own when binding is asynchronous (``fluence up``)."""
        reports = ReportWriter(cluster, background=bind_workers > 0)
        """Why groups wait, written behind the bindings when binding is asynchronous."""
        scheduling = settings.scheduling
        self.reporter = Reporter(cluster, self.metrics, clock, self.events, Backoff(
            clock, scheduling.pod_initial_backoff_seconds, scheduling.pod_max_backoff_seconds),
            ArrivalReports(clock, scheduling.arrival_report_seconds), reports)
        self.binder = Binder(cluster, self.view, self.records, self.manager, self.reporter,
                             bind_workers)
        reports.busy = lambda: bool(self.binder.in_flight)
        preemptor = Preemptor(cluster, self.view, self.records, self.events)
        self.cycle = Cycle(settings, self.manager, self.view, self.records, self.binder,
                           self.reporter, preemptor, self.metrics)
        self.fallback = Fallback(self.view, self.records, None if read_only else self.events)
        self.view.on_outgrown = self.fallback.account_outgrown
        self.promises = PromiseKeeper(self.view, self.records, self.binder, self.fallback,
                                      self.cycle.feasible)
        self._versions: dict[str, str] = {}
        """The resourceVersion each kind was listed or last applied at (start, :meth:`pump`)."""
        self.watch_chunk = settings.scheduling.watch_chunk
        """Seconds of one watch call in :meth:`run`'s threads: how soon a thread sees that it
        must stop. The next call resumes where the thread's last one ended."""
        self._absent: set[str] = set()
        """Optional kinds the cluster did not serve at start."""
        self.inbox = Inbox()
        """What the watch threads of :meth:`run` delivered and the loop has not applied."""

    @property
    def started(self) -> bool:
        return self.view.started

    @property
    def graph(self) -> ResourceGraph:
        return self.view.graph

    @property
    def matcher(self) -> Matcher:
        return self.view.matcher

    # -- start and restore ---------------------------------------------------------

    def start(self) -> None:
        """List the cluster, build the graph, restore recorded allocations, pin foreign pods,
        and keep the records' promises (bind their unbound members) before placing anything."""
        view = self.view
        with view.lock:
            for resource in WATCHED:
                try:
                    listing = self.cluster.list(resource)
                except NotFound:
                    if resource.plural not in OPTIONAL:
                        raise
                    logger.info("this cluster serves no %s: not watched", resource.plural)
                    self._absent.add(resource.plural)
                    continue
                self._versions[resource.plural] = listing.resource_version
                view.replace(resource.plural, listing.items)
            self._build()
            view.started = True
            view.track_utilisation(self.metrics)
            summary = self.graph.summary()
            logger.info("graph: %s", ", ".join(f"{k}={v}" for k, v in summary.items()))
            logger.info("matcher: %s (policy %s)", self.matcher.name,
                        self.settings.graph.match_policy.value)
            if not self.read_only:
                self.promises.keep(self.cycle.context())

    def _build(self) -> None:
        view = self.view
        view.install(*build_graph(view.nodes.values(), self.config, self.settings, self.manager,
                                  view.numa))
        owners = [("podgroups", pg) for pg in view.pod_groups.values()]
        owners += [("pods", p) for p in view.pods.values() if g.is_ours(p)]
        self.records.restore(owners, view.matcher, view.alive, self._vet, view.graph)
        self.fallback.account_unrestored()  # before pins: these are held with their owners
        view.pin_foreign_pods()
        view.backends.sync(view.graph, view.matcher)  # the backends claims hold, after both

    def _vet(self, owner: g.Owner, record: HeldPlacement) -> str | None:
        """Why a record read at start cannot be trusted (:func:`distrust`), or None."""
        return distrust(owner, record, self.view.pods, self.view.nodes, self.view.graph)

    def reload_config(self, config: ResourceConfig) -> None:
        """Apply a new resources config: rebuild the graph and re-hold everything held.

        The new graph and matcher are made first; if that fails (FluenceError),
        the old ones stay in use.
        """
        with self.view.lock:
            graph, matcher = build_graph(self.view.nodes.values(), config, self.settings,
                                         self.manager, self.view.numa)
            self.config = config
            self.view.swap(graph, matcher)
            summary = ", ".join(f"{k}={v}" for k, v in graph.summary().items())
            logger.info("resources config applied: %s", summary)

    # -- the parts' entry points ---------------------------------------------------

    def handle(self, plural: str, event: str, obj: KubeObject) -> None:
        """Apply one watch event to the view (see :meth:`ClusterView.handle`)."""
        self.view.handle(plural, event, obj)

    def schedule_once(self) -> list[CycleResult]:
        """One pass over the pending groups (see :meth:`Cycle.schedule_once`)."""
        return self.cycle.schedule_once()

    def drain(self, timeout: float | None = None) -> None:
        """Wait for the bindings in flight (asynchronous binding only)."""
        self.binder.drain(timeout)

    # -- watching ---------------------------------------------------------------------

    def pump(self, timeout: float = 0) -> int:
        """Apply pending watch events without threads; returns how many were applied."""
        applied = 0
        for resource in self._watched():
            for event, obj in self.cluster.watch(
                resource, resource_version=self._versions.get(resource.plural), timeout=timeout
            ):
                self._advance(resource.plural, event, obj)
                applied += 1
        return applied

    def _watched(self) -> list[Resource]:
        """The kinds this cluster serves (an optional one it lacked at start is left out)."""
        return [r for r in WATCHED if r.plural not in self._absent]

    def _advance(self, plural: str, event: str, obj: KubeObject) -> None:
        version = metadata_of(obj).get("resourceVersion")
        if version:
            self._versions[plural] = version
        self.view.handle(plural, event, obj)

    def run(self, stop: threading.Event, *, idle: float = 5.0) -> None:
        """Watch in threads and schedule whenever something changed (``fluence up``).

        The threads put what they see in the :class:`Inbox` (the newest state of each
        object, at most one listing per kind), so a long cycle over a backlog costs no
        memory per event; the loop applies all of it before each cycle. Setting ``stop``
        cancels the watches in flight and wakes the loop, so the loop and its watch threads
        end at once rather than when the current watch request or idle wait runs out; no
        cycle starts after ``stop``.
        """
        if not self.started:
            self.start()
        inbox = self.inbox
        self.binder.wake = inbox.settle
        self.cycle.arrived = inbox.arrivals
        cancel = Cancellation()
        watchers = [threading.Thread(target=self._watch_forever,
                                     args=(resource, inbox, stop, cancel), daemon=True,
                                     name=f"watch-{resource.plural}")
                    for resource in self._watched()]
        for watcher in watchers:
            watcher.start()
        threading.Thread(target=_cancel_on_stop, args=(stop, cancel, inbox), daemon=True,
                         name="watch-stop").start()
        try:
            self.schedule_once()
            while not stop.is_set():
                for change in inbox.take(timeout=self._wait(idle)) or ():
                    self._advance(*change)
                if stop.is_set():
                    break
                self.schedule_once()
        finally:
            cancel.cancel()
            for watcher in watchers:
                watcher.join(WATCH_JOIN_SECONDS)
        self.drain(timeout=30)

    def next_wakeup(self) -> float | None:
        """The clock time at which the first group waiting out its backoff may be tried again,
        or the first still-arriving group is due to be told why it waits
        (:mod:`~fluence_core.scheduler.arrivals`), whichever is sooner: the loop, and the
        simulator, wake then even if nothing changes."""
        times = [t for t in (self.reporter.backoff.next_expiry(),
                             self.reporter.arrivals.next_due()) if t is not None]
        return min(times, default=None)

    def _wait(self, idle: float) -> float:
        """How long the loop may wait for a change: ``idle`` at most, less when a backoff
        expires sooner."""
        wake = self.next_wakeup()
        return idle if wake is None else max(0.0, min(idle, wake - self.clock()))

    def _watch_forever(self, resource: Resource, inbox: Inbox, stop: threading.Event,
                       cancel: Cancellation) -> None:
        """Watch one kind until ``stop`` (or ``cancel``, which also ends a watch waiting for
        its next event), each call resuming at the version this thread last
        received (an event's, or a re-list's after a 410).

        Never at the version the loop last applied: that one stands still while a cycle
        runs, and a watch resumed from it after each chunk ran into 410 and re-listed,
        again and again, at the same version.
        """
        plural = resource.plural
        version = self._versions.get(plural)
        while not (stop.is_set() or cancel.cancelled):
            try:
                for event, obj in self.cluster.watch(
                    resource, resource_version=version, timeout=self.watch_chunk, cancel=cancel
                ):
                    metadata = metadata_or_none(obj)
                    if metadata is not None and metadata.get("resourceVersion"):
                        version = str(metadata["resourceVersion"])
                    inbox.put(plural, event, obj)
                    if stop.is_set():
                        return
            except ApiError as error:
                if stop.is_set() or cancel.cancelled:
                    return
                logger.warning("watch of %s failed (%s); retrying", plural, error)
                stop.wait(1.0)
            except Exception:  # a watch thread never dies: a dead one would freeze the view
                if stop.is_set() or cancel.cancelled:
                    return
                logger.exception("watch of %s broke; retrying", plural)
                stop.wait(1.0)


def _cancel_on_stop(stop: threading.Event, cancel: Cancellation, inbox: Inbox) -> None:
    """Cancel the watches and wake the loop as soon as ``stop`` is set; give up once the loop
    has cancelled them itself (it ended another way), so this thread never outlives it."""
    while not cancel.cancelled:
        if stop.wait(0.5):
            cancel.cancel()
            inbox.wake()
            return
