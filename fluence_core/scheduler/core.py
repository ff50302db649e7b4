"""The scheduling loop: cluster view in, bindings out, everything through the hooks.

The :class:`Scheduler` keeps a cache of nodes, pods and PodGroups fed by
list+watch, a resource graph and a matcher. One cycle takes the pending groups
in order and, for each, runs prefilter -> match (all-or-nothing) -> filter ->
(postfilter, rematch, preemption) -> reserve -> prebind (durable record) ->
bind. A failure at any step after the match cancels the allocation, so a
failed bind never leaks. A group that does not fit is retried only after the
cluster changed (a node came, an allocation was cancelled), never in a busy
loop.

It is driven two ways: :meth:`Scheduler.run` (threads watch the API; the loop
wakes on changes) for ``fluence up``, and :meth:`Scheduler.pump` +
:meth:`Scheduler.schedule_once` for tests and the simulator, with no threads.

Binding is synchronous by default. With ``bind_workers`` > 0 (``fluence up``),
the binding cycle (durable record, binds, events) runs on a thread pool while
the next groups are matched, as kube-scheduler binds asynchronously: the pods
in flight are left out of the pending groups, and a failed bind takes the
scheduler's lock to give its allocation back.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from fluence_core import names
from fluence_core.cluster_api import DELETED, NODES, PODGROUPS, PODS, RESYNC, ClusterAPI, KubeDict
from fluence_core.errors import FluenceError
from fluence_core.graph import ResourceGraph
from fluence_core.jobspec import compute_jobspec
from fluence_core.kube_errors import ApiError, Conflict, NotFound
from fluence_core.log import logger
from fluence_core.match import GroupMatch, GroupMiss, match_group
from fluence_core.matcher.base import Matcher, MatchOutcome
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.placement import PodPlacement
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.resource_config import ResourceConfig, load_resource_config
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.records import HeldPlacement, read_records, record_annotations
from fluence_core.settings import Settings

WATCHED = (NODES, PODS, PODGROUPS)


@dataclass
class CycleResult:
    """What one attempt at one group came to."""

    group: str
    placed: dict[str, str] = field(default_factory=dict)
    reason: str | None = None


@dataclass
class _Pin:
    """A pod Fluence did not place (or lost the record of), held where it runs."""

    jobid: int
    node: str


class _HeldMembers(Mapping[g.PodKey, int]):
    """Members each PodGroup already has placed and alive, counted only for the groups asked
    about (a cycle asks for the pending gangs, not for every group ever held)."""

    def __init__(self, scheduler: "Scheduler") -> None:
        self._scheduler = scheduler

    def __getitem__(self, key: g.PodKey) -> int:
        namespace, owner = key
        records = self._scheduler.held.get(("podgroups", namespace, owner))
        if records is None:
            raise KeyError(key)
        return sum(1 for r in records for p in r.pods if self._scheduler._alive(namespace, p))

    def __iter__(self) -> Iterator[g.PodKey]:
        return ((ns, owner) for (resource, ns, owner) in self._scheduler.held if resource == "podgroups")

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Scheduler:
    """Fluence's scheduler over any :class:`ClusterAPI` (real or fake)."""

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
        self._binder = ThreadPoolExecutor(bind_workers, thread_name_prefix="bind") if bind_workers else None
        self._in_flight: set[g.PodKey] = set()
        self._assumed: dict[g.PodKey, str] = {}
        """Pods we bound whose binding the watch has not shown yet: never pending again."""
        self._placed_on: dict[g.PodKey, str] = {}
        self._pods_per_node: dict[str, int] = {}
        """Live pods bound (or being bound) to each node, for the kubelet's pod limit."""
        self._owners_in_flight: set[tuple[str, str, str]] = set()
        self._bindings: set[Future[CycleResult]] = set()
        self.settings = settings
        self.manager = manager or get_plugin_manager(settings)
        self.config = config if config is not None else load_resource_config(settings.resources)
        self.clock = clock
        self.metrics = SchedulerMetrics()
        self.nodes: dict[str, KubeDict] = {}
        self.pods: dict[g.PodKey, KubeDict] = {}
        self._unplaced: dict[g.PodKey, KubeDict] = {}
        """The cached pods that may still need placing (unbound, unfinished): a cycle groups
        these, not every pod in the cluster."""
        self.pod_groups: dict[g.PodKey, KubeDict] = {}
        self.held: dict[tuple[str, str, str], list[HeldPlacement]] = {}
        self.pins: dict[g.PodKey, _Pin] = {}
        self.generation = 0
        self._failed_at: dict[str, int] = {}
        self._told: dict[str, str] = {}
        self._first_seen: dict[str, float] = {}
        self._versions: dict[str, str] = {}
        self._lock = threading.RLock()
        self.graph: ResourceGraph
        self.matcher: Matcher
        self.started = False

    # -- start and restore ---------------------------------------------------------

    def start(self) -> None:
        """List the cluster, build the graph, restore recorded allocations, pin foreign pods."""
        with self._lock:
            for resource in WATCHED:
                listing = self.cluster.list(resource)
                self._versions[resource.plural] = listing.resource_version
                self._replace_cache(resource.plural, listing.items)
            self._build()
            self.started = True
            summary = self.graph.summary()
            logger.info("graph: %s", ", ".join(f"{k}={v}" for k, v in summary.items()))
            logger.info("matcher: %s (policy %s)", self.matcher.name, self.settings.match_policy.value)

    def _build(self) -> None:
        infos = [NodeInfo.from_kube(n) for n in self.nodes.values()]
        self.graph = ResourceGraph(infos, self.config, memory_chunks_per_core=self.settings.memory_chunks_per_core)
        matcher = self.manager.hook.fluence_matcher(settings=self.settings, graph=self.graph)
        if matcher is None:
            raise FluenceError("no plugin returned a matcher (is the embedded matcher blocked?)")
        self.matcher = matcher
        self._restore_records()
        self._pin_foreign_pods()

    def _restore_records(self) -> None:
        """Re-hold every recorded placement whose pods still live; drop the rest."""
        owners: list[tuple[str, KubeDict]] = [("podgroups", pg) for pg in self.pod_groups.values()]
        owners += [("pods", p) for p in self.pods.values() if g.is_ours(p)]
        for owner_resource, obj in owners:
            try:
                records = read_records(owner_resource, obj)
            except ValueError as error:
                logger.error("ignoring a record: %s", error)
                continue
            if not records:
                continue
            namespace, name = g.pod_key(obj)
            kept = []
            for record in records:
                if not any(self._alive(namespace, pod) for pod in record.pods):
                    logger.info("Cancel jobid %s: the pods of %s/%s are gone", record.jobids, namespace, name)
                    continue
                try:
                    for allocation in record.allocations.values():
                        self.matcher.restore(allocation)
                except FluenceError as error:
                    logger.error("cannot restore %s/%s jobids %s: %s", namespace, name, record.jobids, error)
                    continue
                logger.info("restored jobids %s for %s/%s", record.jobids, namespace, name)
                kept.append(record)
            self.held[(owner_resource, namespace, name)] = kept
            if len(kept) != len(records):
                self._write_record(owner_resource, namespace, name)

    def _alive(self, namespace: str, pod: str) -> bool:
        obj = self.pods.get((namespace, pod))
        return obj is not None and not g.is_finished(obj)

    @staticmethod
    def _owners_of(key: g.PodKey, pod: KubeDict) -> list[tuple[str, str, str]]:
        """Where a record holding this pod can live: its PodGroup, or the pod itself."""
        namespace, name = key
        owners = [("pods", namespace, name)]
        group = g.pod_group_name(pod)
        if group:
            owners.append(("podgroups", namespace, group))
        return owners

    def _is_covered(self, key: g.PodKey, pod: KubeDict) -> bool:
        """Whether a held record names this pod: looks only where its record can live."""
        return any(key[1] in record.pods for owner in self._owners_of(key, pod)
                   for record in self.held.get(owner, ()))

    def _pin_foreign_pods(self) -> None:
        for key, pod in self.pods.items():
            if not self._is_covered(key, pod):
                self._pin(key, pod)

    def _pin(self, key: g.PodKey, pod: Mapping[str, Any]) -> None:
        """Subtract a running pod we hold no record for from its node."""
        if key in self.pins or not g.is_bound(pod) or g.is_finished(pod):
            return
        node = pod["spec"]["nodeName"]
        if not self.graph.has_node(node):
            return
        request = PodRequest.from_kube(pod)
        jobspec = compute_jobspec([request], {"hostlist": [node]})
        allocation = self.matcher.match_allocate(jobspec)
        if allocation is None:
            logger.warning("pod %s/%s on %s does not fit what the graph has left there", *key, node)
            return
        self.pins[key] = _Pin(allocation.jobid, node)
        logger.debug("pinned %s/%s on %s as jobid %d", *key, node, allocation.jobid)

    def _unpin(self, key: g.PodKey) -> None:
        pin = self.pins.pop(key, None)
        if pin is not None:
            self.matcher.cancel(pin.jobid)
            self.generation += 1

    # -- cache maintenance ---------------------------------------------------------

    def _replace_cache(self, plural: str, items: Iterable[KubeDict]) -> None:
        cache = self._cache(plural)
        fresh = {self._key(plural, obj): obj for obj in items}
        if self.started:
            for key, old in list(cache.items()):
                if key not in fresh:
                    self.handle(plural, DELETED, old)
            for obj in fresh.values():
                self.handle(plural, "MODIFIED", obj)
        else:
            cache.clear()
            cache.update(fresh)
            if plural == "pods":
                self._unplaced = {k: p for k, p in fresh.items()
                                  if not g.is_bound(p) and not g.is_finished(p) and not g.is_terminating(p)}
                self._placed_on, self._pods_per_node = {}, {}
                for key, pod in fresh.items():
                    if g.is_bound(pod) and not g.is_finished(pod):
                        self._count_on(key, pod["spec"]["nodeName"])

    def _cache(self, plural: str) -> dict[Any, KubeDict]:
        return {"nodes": self.nodes, "pods": self.pods, "podgroups": self.pod_groups}[plural]  # type: ignore[return-value]

    @staticmethod
    def _key(plural: str, obj: KubeDict) -> Any:
        return (obj.get("metadata") or {}).get("name") if plural == "nodes" else g.pod_key(obj)

    def handle(self, plural: str, event: str, obj: KubeDict) -> None:
        """Apply one watch event to the cache, the graph and the held allocations."""
        with self._lock:
            if event == RESYNC:
                self._replace_cache(plural, obj.get("items") or [])
                return
            if plural == "nodes":
                self._on_node(event, obj)
            elif plural == "pods":
                self._on_pod(event, obj)
            elif plural == "podgroups":
                self._on_pod_group(event, obj)

    def _on_node(self, event: str, obj: KubeDict) -> None:
        name = obj["metadata"]["name"]
        old = self.nodes.get(name)
        if event == DELETED:
            self.nodes.pop(name, None)
            if self.graph.has_node(name):
                self.matcher.remove_node(name)
                logger.info("node %s removed from the graph", name)
            return
        self.nodes[name] = obj
        info = NodeInfo.from_kube(obj)
        if not self.graph.has_node(name):
            if info.schedulable:
                self.matcher.add_node(info)
                self.generation += 1
                logger.info("node %s added to the graph", name)
                for key, pod in self.pods.items():
                    if (pod.get("spec") or {}).get("nodeName") == name and not self._is_covered(key, pod):
                        self._pin(key, pod)
            return
        if not info.schedulable:
            if not self.graph.node(name).down:
                self.matcher.set_node_down(name, True)
                logger.info("node %s cordoned or tainted: no new work goes there", name)
            return
        if self.graph.node(name).down:
            self.matcher.set_node_down(name, False)
            self.generation += 1
            logger.info("node %s schedulable again", name)
        if old is not None and NodeInfo.from_kube(old) != info:
            vertex = self.graph.node(name)
            if vertex.labels != dict(info.labels):
                vertex.labels = dict(info.labels)
                self.generation += 1
            if ((vertex.cores, vertex.gpus, vertex.max_pods) != (info.cores, info.gpus, info.max_pods)
                    or vertex.memory_chunks * vertex.chunk_mib != info.memory_mib):
                self._replace_node(info)

    def _replace_node(self, info: NodeInfo) -> None:
        """Allocatable changed: rebuild the node and re-hold what was on it."""
        touching = [a for a in self.matcher.allocations().values() if any(s.node == info.name for s in a.nodes)]
        for allocation in touching:
            self.matcher.cancel(allocation.jobid)
        self.matcher.remove_node(info.name)
        self.matcher.add_node(info)
        for allocation in touching:
            try:
                self.matcher.restore(allocation)
            except FluenceError as error:
                logger.error("node %s shrank: cannot re-hold jobid %d: %s", info.name, allocation.jobid, error)
        self.generation += 1
        logger.info("node %s allocatable changed; graph updated", info.name)

    def _on_pod(self, event: str, obj: KubeDict) -> None:
        key = g.pod_key(obj)
        if event == DELETED:
            self.pods.pop(key, None)
        else:
            self.pods[key] = obj
        gone = event == DELETED or g.is_finished(obj)
        if gone:
            self._count_off(key)
        elif g.is_bound(obj):
            self._count_on(key, obj["spec"]["nodeName"])
        if gone or g.is_bound(obj):
            self._assumed.pop(key, None)
        if gone or g.is_bound(obj) or g.is_terminating(obj) or key in self._assumed:
            self._unplaced.pop(key, None)
        else:
            self._unplaced[key] = obj
        if gone:
            self._unpin(key)
            self._release_finished(key, obj)
        elif g.is_bound(obj) and key not in self.pins and not self._is_covered(key, obj):
            self._pin(key, obj)

    def _count_on(self, key: g.PodKey, node: str) -> None:
        if key not in self._placed_on:
            self._placed_on[key] = node
            self._pods_per_node[node] = self._pods_per_node.get(node, 0) + 1

    def _count_off(self, key: g.PodKey) -> None:
        node = self._placed_on.pop(key, None)
        if node is not None:
            self._pods_per_node[node] -= 1

    def pods_on(self, node: str) -> int:
        """Live pods bound, or being bound, to ``node``."""
        return self._pods_per_node.get(node, 0)

    def _release_finished(self, key: g.PodKey, obj: KubeDict | None = None) -> None:
        """Cancel every placement whose members have all finished or gone."""
        namespace, pod = key
        if obj is not None:  # only the pod's own owners can hold it
            owners = [(o, self.held[o]) for o in self._owners_of(key, obj) if o in self.held]
        else:
            owners = list(self.held.items())
        for owner_key, records in owners:
            if owner_key[1] != namespace:
                continue
            remaining = []
            changed = False
            for record in records:
                if pod in record.pods and not any(self._alive(namespace, p) for p in record.pods):
                    self._cancel(record, f"every member of {owner_key[1]}/{owner_key[2]} finished")
                    changed = True
                else:
                    remaining.append(record)
            if changed:
                self.held[owner_key] = remaining
                self._write_record(*owner_key)

    def _on_pod_group(self, event: str, obj: KubeDict) -> None:
        key = g.pod_key(obj)
        if event == DELETED:
            self.pod_groups.pop(key, None)
            for record in self.held.pop(("podgroups", *key), []):
                self._cancel(record, f"PodGroup {key[0]}/{key[1]} was deleted")
            return
        self.pod_groups[key] = obj

    def _cancel(self, record: HeldPlacement, why: str) -> None:
        for allocation in record.allocations.values():
            self.matcher.cancel(allocation.jobid)
        self.generation += 1
        logger.info("Cancel jobid %s (%s)", ",".join(map(str, record.jobids)), why)

    def _write_record(self, owner_resource: str, namespace: str, name: str) -> None:
        if self.read_only:
            return
        placements = self.held.get((owner_resource, namespace, name), [])
        patch = {"metadata": {"annotations": record_annotations(placements)}}
        try:
            self.cluster.patch(owner_resource, name, patch, namespace)
        except NotFound:
            pass
        except ApiError as error:
            logger.error("cannot write the record on %s %s/%s: %s", owner_resource, namespace, name, error)

    # -- watching ---------------------------------------------------------------------

    def pump(self, timeout: float = 0) -> int:
        """Apply pending watch events without threads; returns how many were applied."""
        applied = 0
        for resource in WATCHED:
            for event, obj in self.cluster.watch(
                resource, resource_version=self._versions.get(resource.plural), timeout=timeout
            ):
                self._advance(resource.plural, event, obj)
                applied += 1
        return applied

    def _advance(self, plural: str, event: str, obj: KubeDict) -> None:
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self._versions[plural] = version
        self.handle(plural, event, obj)

    def run(self, stop: threading.Event, *, idle: float = 5.0) -> None:
        """Watch in threads and schedule whenever something changed (``fluence up``)."""
        if not self.started:
            self.start()
        events: queue.Queue[tuple[str, str, KubeDict]] = queue.Queue()
        for resource in WATCHED:
            threading.Thread(
                target=self._watch_forever, args=(resource, events, stop), daemon=True,
                name=f"watch-{resource.plural}",
            ).start()
        self.schedule_once()
        while not stop.is_set():
            try:
                item = events.get(timeout=idle)
            except queue.Empty:
                self.schedule_once()
                continue
            self._advance(*item)
            while True:
                try:
                    self._advance(*events.get_nowait())
                except queue.Empty:
                    break
            self.schedule_once()
        self.drain(timeout=30)

    def _watch_forever(self, resource: Any, events: "queue.Queue[tuple[str, str, KubeDict]]",
                       stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                for event, obj in self.cluster.watch(
                    resource, resource_version=self._versions.get(resource.plural), timeout=60
                ):
                    events.put((resource.plural, event, obj))
                    if stop.is_set():
                        return
            except ApiError as error:
                if stop.is_set():
                    return
                logger.warning("watch of %s failed (%s); retrying", resource.plural, error)
                stop.wait(1.0)

    # -- scheduling ----------------------------------------------------------------------

    def schedule_once(self) -> list[CycleResult]:
        """One pass over the pending groups, in order; returns what each attempt came to."""
        with self._lock:
            unplaced = (p for k, p in self._unplaced.items() if k not in self._in_flight)
            pending = g.pending_groups(unplaced, self.pod_groups, _HeldMembers(self))
            self.metrics.pending_groups.set(len(pending))
            results = []
            for group in pending:
                self._first_seen.setdefault(group.key, self.clock())
                if not group.ready:
                    self._tell_waiting(group, group.waiting or "waiting")
                    continue
                if self._failed_at.get(group.key) == self.generation:
                    continue
                if self._owner(group) in self._owners_in_flight:
                    continue  # one binding at a time per owner keeps its record writes in order
                result = self._attempt(group)
                results.append(result)
            self._update_utilisation()
            return results

    def _context(self) -> dict[str, Any]:
        return {"settings": self.settings, "graph": self.graph, "matcher": self.matcher,
                "cluster": self.cluster, "scheduler": self}

    def _attempt(self, pending: g.PendingGroup) -> CycleResult:
        ctx = self._context()
        try:
            group = pending.requests()
        except ValueError as error:
            return self._fail(pending, f"cannot read the pods' requests: {error}", "error")
        hook = self.manager.hook
        veto = hook.fluence_prefilter(group=group, ctx=ctx)
        if veto:
            return self._fail(pending, f"prefilter: {veto}", "vetoed")
        try:
            outcome = match_group(group, self.graph, self.matcher)
        except FluenceError as error:
            return self._fail(pending, str(error), "error")
        vetoed = self._filtered(group, outcome, ctx)
        if isinstance(outcome, GroupMatch) and vetoed:
            outcome = GroupMiss(group, "compute", MatchOutcome.BUSY, [])
        if isinstance(outcome, GroupMiss):
            ctx["vetoed"] = sorted(vetoed)
            exclude = hook.fluence_postfilter(group=group, reason=self._veto_reason(vetoed) or outcome.reason,
                                              ctx=ctx)
            if exclude is not None:
                outcome = match_group(group, self.graph, self.matcher, exclude_nodes=sorted(set(exclude) | set(vetoed)))
                again = self._filtered(group, outcome, ctx)
                if isinstance(outcome, GroupMatch) and again:
                    outcome = GroupMiss(group, "compute", MatchOutcome.BUSY, [])
                vetoed.update(again)
            if isinstance(outcome, GroupMiss):
                outcome = self._preempt(pending, group) or outcome
            if isinstance(outcome, GroupMiss):
                return self._fail(pending, self._veto_reason(vetoed) or outcome.reason, "unschedulable")
        return self._commit(pending, group, outcome, ctx)

    @staticmethod
    def _veto_reason(vetoed: Mapping[str, str]) -> str:
        return "; ".join(f"filter vetoed {node}: {why}" for node, why in sorted(vetoed.items()))

    def _filtered(self, group: Group, outcome: GroupMatch | GroupMiss, ctx: dict[str, Any]) -> dict[str, str]:
        """Run the filter over a match; a vetoed match is given back. Returns node -> reason."""
        if not isinstance(outcome, GroupMatch):
            return {}
        planned: dict[str, int] = {}
        for placement in outcome.placements.values():
            if placement.node is not None:
                planned[placement.node] = planned.get(placement.node, 0) + 1
        ctx["planned"] = planned
        vetoed = self._filter(group, outcome, ctx)
        if vetoed:
            self._release_match(outcome)
        return vetoed

    def _filter(self, group: Group, match: GroupMatch, ctx: Mapping[str, Any]) -> dict[str, str]:
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

    def _release_match(self, match: GroupMatch) -> None:
        for allocation in match.allocations.values():
            self.matcher.cancel(allocation.jobid)

    @staticmethod
    def _owner(pending: g.PendingGroup) -> tuple[str, str, str]:
        """Where the group's durable record lives: its PodGroup, or the lone pod."""
        if pending.pod_group is not None:
            return ("podgroups", pending.namespace, pending.key.split("/", 1)[1])
        return ("pods", pending.namespace, g.pod_key(pending.pods[0])[1])

    def _commit(self, pending: g.PendingGroup, group: Group, match: GroupMatch, ctx: Mapping[str, Any]) -> CycleResult:
        hook = self.manager.hook
        placements = match.placements
        owner = self._owner(pending)
        record = HeldPlacement(owner[0], owner[1], owner[2], [g.pod_key(p)[1] for p in pending.pods],
                               dict(match.allocations))
        try:
            hook.fluence_reserve(group=group, placements=placements, ctx=ctx)
            extra: dict[str, str] = {}
            for contributed in hook.fluence_prebind(group=group, placements=placements, ctx=ctx):
                extra.update(contributed or {})
        except Exception as error:  # a failing plugin gives the allocation back
            return self._abandon(pending, group, match, owner, None, {}, ctx, error)
        self.held.setdefault(owner, []).append(record)
        if self._binder is None:
            return self._bind_group(pending, group, match, owner, record, extra, ctx)
        keys = [g.pod_key(p) for p in pending.pods]
        self._in_flight.update(keys)
        self._owners_in_flight.add(owner)
        future = self._binder.submit(self._bind_group, pending, group, match, owner, record, extra, ctx)
        self._bindings.add(future)

        def settle(done: Future[Any]) -> None:
            with self._lock:
                self._in_flight.difference_update(keys)
                self._owners_in_flight.discard(owner)
                self._bindings.discard(done)

        future.add_done_callback(settle)
        planned = {p.pod: p.node or "" for p in placements.values()}
        return CycleResult(pending.key, placed=planned)

    def _bind_group(self, pending: g.PendingGroup, group: Group, match: GroupMatch,
                    owner: tuple[str, str, str], record: HeldPlacement, extra: Mapping[str, str],
                    ctx: Mapping[str, Any]) -> CycleResult:
        """Prebind (the durable record) and bind every pod; on failure, give everything back."""
        bound: dict[str, str] = {}
        try:
            with self._lock:
                annotations: dict[str, Any] = dict(extra)
                annotations.update(record_annotations(self.held.get(owner, [])))
            self.cluster.patch(owner[0], owner[2], {"metadata": {"annotations": annotations}}, owner[1])
            self._bind_all(pending, match.placements, bound)
        except Exception as error:  # any failure after the match gives the allocation back
            with self._lock:
                return self._abandon(pending, group, match, owner, record, bound, ctx, error)
        with self._lock:
            latency = self.clock() - self._first_seen.pop(pending.key, self.clock())
            self.metrics.group_latency.observe(latency)
            self.metrics.attempts.labels(result="scheduled").inc()
            self._failed_at.pop(pending.key, None)
            self._told.pop(pending.key, None)
        if pending.pod_group is not None:
            self._set_group_condition(pending, "True", "Scheduled", f"{len(bound)} pods placed by fluence")
        logger.info("group %s bound: %s", pending.key, ", ".join(f"{p}->{n}" for p, n in bound.items()))
        return CycleResult(pending.key, placed=bound)

    def _abandon(self, pending: g.PendingGroup, group: Group, match: GroupMatch,
                 owner: tuple[str, str, str], record: HeldPlacement | None, bound: Mapping[str, str],
                 ctx: Mapping[str, Any], error: Exception) -> CycleResult:
        """Undo a commit: unreserve, cancel the allocation, drop the record, pin what did bind."""
        self.manager.hook.fluence_unreserve(group=group, placements=match.placements, ctx=ctx)
        self._release_match(match)
        records = self.held.get(owner, [])
        if record is not None and record in records:
            records.remove(record)
            self._write_record(*owner)
        for pod in pending.pods:
            key = g.pod_key(pod)
            if f"{key[0]}/{key[1]}" in bound:
                self._pin(key, pod)  # bound before the failure: it runs there, so it counts there
        return self._fail(pending, f"binding failed: {error}", "error")

    def drain(self, timeout: float | None = None) -> None:
        """Wait for the bindings in flight (asynchronous binding only)."""
        pending = set(self._bindings)
        if pending:
            wait(pending, timeout=timeout)

    def _bind_all(self, pending: g.PendingGroup, placements: Mapping[str, PodPlacement],
                  bound: dict[str, str]) -> None:
        """Bind each pod, recording in ``bound`` those that were."""
        for pod in pending.pods:
            namespace, name = g.pod_key(pod)
            node = placements[f"{namespace}/{name}"].node
            if node is None:
                raise FluenceError(f"pod {namespace}/{name} got no node")
            try:
                self.cluster.bind(namespace, name, node, uid=(pod.get("metadata") or {}).get("uid"))
            except Conflict as error:
                if bound:
                    logger.error("gang %s partly bound (%s) before %s failed: %s", pending.key, bound, name, error)
                raise
            bound[f"{namespace}/{name}"] = node
            with self._lock:
                self._assumed[(namespace, name)] = node
                self._unplaced.pop((namespace, name), None)
                self._count_on((namespace, name), node)
            pod["spec"]["nodeName"] = node
            self.cluster.post_event(pod, "Normal", "Scheduled",
                                    f"Successfully assigned {namespace}/{name} to {node}")

    def _fail(self, pending: g.PendingGroup, reason: str, result: str) -> CycleResult:
        self.metrics.attempts.labels(result=result).inc()
        self._failed_at[pending.key] = self.generation
        self._tell_waiting(pending, reason)
        return CycleResult(pending.key, reason=reason)

    def _tell_waiting(self, pending: g.PendingGroup, reason: str) -> None:
        """FailedScheduling events and PodScheduled=False, once per new reason."""
        if self._told.get(pending.key) == reason:
            return
        self._told[pending.key] = reason
        logger.info("group %s waits: %s", pending.key, reason)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": reason}
        for pod in pending.pods:
            namespace, name = g.pod_key(pod)
            try:
                self.cluster.post_event(pod, "Warning", "FailedScheduling", reason)
                self.cluster.patch_status(PODS, name, {"status": {"conditions": [condition]}}, namespace)
            except ApiError as error:
                logger.debug("cannot report on %s/%s: %s", namespace, name, error)
        if pending.pod_group is not None:
            self._set_group_condition(pending, "False", "Unschedulable", reason)

    def _set_group_condition(self, pending: g.PendingGroup, status: str, reason: str, message: str) -> None:
        namespace, name = pending.key.split("/", 1)
        condition = {
            "type": "PodGroupScheduled", "status": status, "reason": reason, "message": message[:1000],
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            self.cluster.patch_status(PODGROUPS, name, {"status": {"conditions": [condition]}}, namespace)
        except ApiError as error:
            logger.debug("cannot set PodGroupScheduled on %s: %s", pending.key, error)

    # -- preemption --------------------------------------------------------------------------

    def _preempt(self, pending: g.PendingGroup, group: Group) -> GroupMatch | None:
        """Cancel lower-priority, unprotected placements until the group fits; evict them if it does."""
        victims = []
        for owner, records in self.held.items():
            for record in records:
                live = [
                    p for p in (self.pods.get((owner[1], name)) for name in record.pods)
                    if p is not None and not g.is_finished(p)
                ]
                if not live:
                    continue
                top = max(g.priority(p) for p in live)
                protected = any(g.annotations_of(p).get(names.PROTECTED_ANNOTATION) == "true" for p in live)
                if top < pending.priority and not protected:
                    victims.append((top, owner, record, live))
        if not victims:
            return None
        victims.sort(key=lambda v: v[0])
        taken: list[tuple[tuple[str, str, str], HeldPlacement, list[KubeDict]]] = []
        for _, owner, record, live in victims:
            for allocation in record.allocations.values():
                self.matcher.cancel(allocation.jobid)
            taken.append((owner, record, live))
            outcome = match_group(group, self.graph, self.matcher)
            if isinstance(outcome, GroupMatch):
                for victim_owner, victim, pods in taken:
                    self.held[victim_owner].remove(victim)
                    self._write_record(*victim_owner)
                    for pod in pods:
                        namespace, name = g.pod_key(pod)
                        logger.info("preempting %s/%s (priority %d) for %s", namespace, name, g.priority(pod), pending.key)
                        self.cluster.post_event(pod, "Warning", "Preempted", f"preempted by fluence for {pending.key}")
                        self.cluster.delete(PODS, name, namespace)
                return outcome
        for _, record, _ in taken:
            for allocation in record.allocations.values():
                self.matcher.restore(allocation)
        return None

    # -- config and reporting ------------------------------------------------------------------

    def reload_config(self, config: ResourceConfig) -> None:
        """Apply a new resources config: rebuild the graph and re-hold everything held."""
        with self._lock:
            held = dict(self.matcher.allocations())
            pins = dict(self.pins)
            self.config = config
            self.pins = {}
            infos = [NodeInfo.from_kube(n) for n in self.nodes.values()]
            self.graph = ResourceGraph(infos, config, memory_chunks_per_core=self.settings.memory_chunks_per_core)
            self.matcher = self.manager.hook.fluence_matcher(settings=self.settings, graph=self.graph)
            for allocation in held.values():
                try:
                    self.matcher.restore(allocation)
                except FluenceError as error:
                    logger.error("after the config change jobid %d cannot be held: %s", allocation.jobid, error)
            for key, pin in pins.items():
                if pin.jobid in held:
                    self.pins[key] = pin
            self.generation += 1
            logger.info("resources config applied: %s", ", ".join(f"{k}={v}" for k, v in self.graph.summary().items()))

    def _update_utilisation(self) -> None:
        total = sum(n.cores for n in self.graph.nodes) or 1
        used = sum(len(s.cores) for a in self.matcher.allocations().values() for s in a.nodes)
        self.metrics.utilisation.labels(resource="cores").set(used / total)
        if self.graph.virtual:
            held_virtual = sum(len(a.virtual) for a in self.matcher.allocations().values())
            self.metrics.utilisation.labels(resource="virtual").set(held_virtual / len(self.graph.virtual_roots or [1]))


