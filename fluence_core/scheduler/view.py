"""The scheduler's view of the cluster: caches, the graph kept in step, foreign pods.

:class:`ClusterView` applies list and watch results to its caches of nodes,
pods and PodGroups, and keeps the resource graph (through the matcher) in step:
nodes come, go, are cordoned or change size; a pod Fluence holds no record for
is *pinned* where it runs so its resources count as used; a placement whose
pods all finished is cancelled and its record rewritten.

Every method expects the caller to hold :attr:`ClusterView.lock` (``handle``
takes it itself); the other parts of the scheduler share that one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fluence_core.dra.state import PLURALS as DRA_PLURALS
from fluence_core.dra.state import DraState
from fluence_core.dra.vertices import DeviceVertices
from fluence_core.scheduler.backend_ledger import BackendLedger
from fluence_core.kube.api import DELETED, NODE_RESOURCE_TOPOLOGIES, RESYNC, KubeObject
from fluence_core.errors import FluenceError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import COMPUTE
from fluence_core.log import logger
from fluence_core.matcher.group import GroupMatch
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.pooled import restore_order
from fluence_core.models import NodeInfo
from fluence_core.numa import NodeNuma, read_nrt
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.restart.conservative import hold_running
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.records import HeldPlacement, RecordBook, outgrown
from fluence_core.topology import domains_of
from fluence_core.kube.meta import metadata_of, metadata_or_none


def describe(obj: Any) -> str:
    """``namespace/name`` of a watched object, whatever shape it came in."""
    metadata = metadata_or_none(obj)
    if metadata is None:
        return "(without metadata)"
    name = str(metadata.get("name"))[:253]
    return f"{metadata['namespace']}/{name}" if metadata.get("namespace") else name


def read_node(obj: KubeObject, *, quiet: bool = False,
              numa: Mapping[str, NodeNuma] | None = None) -> NodeInfo | None:
    """The node's shape (with its NUMA zones from ``numa``, by node name), or None (logged)
    when it cannot be read: a node with an absurd or garbled allocatable takes no work, and
    nothing else stops."""
    try:
        info = NodeInfo.from_kube(obj)
        zones = (numa or {}).get(info.name)
        return info if zones is None else replace(info, numa=zones)
    except ValueError as error:
        if not quiet:
            logger.error("cannot use %s: %s", describe(obj), error)
        return None


@dataclass
class Pin:
    """A pod Fluence did not place (or lost the record of), held where it runs."""

    jobid: int | None
    """Its compute job (None when its node had no room left for it)."""
    node: str
    virtual: tuple[int, ...] = ()
    """The jobs holding the virtual resources it requests."""

    @property
    def jobids(self) -> tuple[int, ...]:
        return ((self.jobid,) if self.jobid is not None else ()) + self.virtual


class ClusterView:
    """Nodes, pods and PodGroups as the watches last showed them, and the graph to match."""

    def __init__(self, records: RecordBook) -> None:
        self.records = records
        self.lock = threading.RLock()
        self.nodes: dict[str, KubeObject] = {}
        self.pods: dict[g.PodKey, KubeObject] = {}
        self.pod_groups: dict[g.PodKey, KubeObject] = {}
        self.workloads: dict[g.PodKey, KubeObject] = {}
        self.nrts: dict[str, KubeObject] = {}
        """NodeResourceTopology objects, by node name."""
        self.numa: dict[str, NodeNuma] = {}
        """Each node's NUMA zones, read from its NodeResourceTopology."""
        self.dra = DraState()
        """Devices, classes and claims (:mod:`fluence_core.dra`)."""
        self.backends = BackendLedger(self.dra)
        """The backends claims hold, held in the graph too, and the other way round."""
        """1.36 Workloads: their PodGroup templates may state a gang's topology."""
        self.unplaced: dict[g.PodKey, KubeObject] = {}
        """The cached pods that may still need placing (unbound, unfinished): a cycle groups
        these, not every pod in the cluster."""
        self.pins: dict[g.PodKey, Pin] = {}
        self.generation = 0
        """Bumped whenever room may have appeared; a group that failed is retried after."""
        self.started = False
        """Before start, a listing fills the caches; after, it is applied as events."""
        self.graph: ResourceGraph
        self.matcher: Matcher
        self._assumed: dict[g.PodKey, str] = {}
        """Pods we bound whose binding the watch has not shown yet: never pending again."""
        self._placed_on: dict[g.PodKey, str] = {}
        self._pods_per_node: dict[str, int] = {}
        """Live pods bound (or being bound) to each node, for the kubelet's pod limit."""
        self.pod_changes: set[g.PodKey] = set()
        """Pods changed (or touched) since the feasibility snapshot last read them."""
        self.node_changes = 0
        """Moves whenever a node event is applied: the feasibility snapshot reads every
        node again."""
        self.on_outgrown: Callable[[dict[int, str]], None] | None = None
        """Given the jobs a node change left unheld (jobid -> why), holds their pods from
        what they request
        (:meth:`~fluence_core.scheduler.restart.fallback.Fallback.account_outgrown`, set by
        the scheduler)."""

    # -- graph and matcher --------------------------------------------------------------

    def install(self, graph: ResourceGraph, matcher: Matcher) -> None:
        """Use a fresh graph and matcher (at start, before records are restored)."""
        self.graph = graph
        self.matcher = matcher
        graph.devices = DeviceVertices(self.dra)

    def swap(self, graph: ResourceGraph, matcher: Matcher) -> None:
        """Move to a rebuilt graph and matcher holding every allocation held now.

        Transactional: the new matcher re-holds everything before it is installed; if it
        cannot (a held backend or node is gone from the new graph), FluenceError says
        which, and the old graph and matcher stay in use, untouched.
        """
        failed = []
        for allocation in restore_order(self.matcher.allocations().values()):
            try:
                matcher.restore(allocation)
            except Exception as error:  # any failure leaves the old state whole
                failed.append(f"jobid {allocation.jobid}: {error}")
        if failed:
            raise FluenceError("the new graph cannot hold what is held now ("
                               + "; ".join(failed[:5]) + (" ..." if len(failed) > 5 else "")
                               + "); keeping the old graph")
        self.install(graph, matcher)
        self.generation += 1

    def alive(self, namespace: str, pod: str) -> bool:
        """Whether the cache has this pod, not finished."""
        return g.alive(self.pods, namespace, pod)

    def node_of(self, key: g.PodKey) -> str | None:
        """The node a live pod is bound to, or being bound to; None for none."""
        return self._placed_on.get(key)

    def pods_on(self, node: str) -> int:
        """Live pods bound, or being bound, to ``node``."""
        return self._pods_per_node.get(node, 0)

    def assume(self, key: g.PodKey, node: str, uid: str | None = None) -> None:
        """A pod was just bound to ``node``: count it there before the watch says so.

        A binding is settled after the fact (on the pool, when the next cycle starts): by
        then the watch may have shown it (it counts already), or the pod may be gone or
        replaced by another of its name (another ``uid``), which must not count.
        """
        pod = self.pods.get(key)
        if pod is None or g.is_finished(pod):
            return
        if uid and metadata_of(pod).get("uid") not in (None, uid):
            return
        self.unplaced.pop(key, None)
        self.pod_changes.add(key)
        if key in self._placed_on:
            return
        self._assumed[key] = node
        self._count_on(key, node)

    def touch(self, key: g.PodKey) -> None:
        """The feasibility snapshot reads this pod again (its binding was settled)."""
        self.pod_changes.add(key)

    def release_match(self, match: GroupMatch) -> None:
        """Give back every allocation of a match that will not be committed."""
        for allocation in match.allocations.values():
            self.matcher.cancel(allocation.jobid)

    def cancel(self, record: HeldPlacement, why: str) -> None:
        """Give back a held record's allocations (the caller drops the record)."""
        for allocation in record.allocations.values():
            self.matcher.cancel(allocation.jobid)
        self.generation += 1
        logger.info("Cancel jobid %s (%s)", ",".join(map(str, record.jobids)), why)

    def track_utilisation(self, metrics: SchedulerMetrics) -> None:
        """Have the utilisation gauges read the matcher when they are scraped, not every cycle
        (a sum over every allocation, once per cycle, grew with the cluster)."""
        metrics.utilisation.labels(resource="cores").set_function(self._cores_used)
        metrics.utilisation.labels(resource="virtual").set_function(self._virtual_used)

    def _cores_used(self) -> float:
        with self.lock:
            total = sum(n.cores for n in self.graph.nodes) or 1
            allocations = self.matcher.allocations().values()
            return sum(len(s.cores) for a in allocations for s in a.nodes) / total

    def _virtual_used(self) -> float:
        with self.lock:
            if not self.graph.virtual:
                return 0.0
            held = sum(len(a.virtual) for a in self.matcher.allocations().values())
            return held / len(self.graph.virtual_roots or [1])

    # -- foreign pods ------------------------------------------------------------------

    def pin_foreign_pods(self) -> None:
        """Pin every bound pod no record covers (at start, after records are restored)."""
        for key, pod in self.pods.items():
            if not self.records.covers(key, pod):
                self.pin(key, pod)

    def pin(self, key: g.PodKey, pod: KubeObject) -> None:
        """Subtract a running pod we hold no record for from its node, with the virtual
        resources it requests (:func:`~fluence_core.scheduler.restart.conservative.hold_running`);
        a lone pod of ours is held as its own record instead."""
        if key in self.pins or not g.is_bound(pod) or g.is_finished(pod):
            return
        node = pod["spec"]["nodeName"]
        if not self.graph.has_node(node):
            return
        hold = hold_running(self.graph, self.matcher, pod)
        if hold.problems:
            how = "is held only in part" if hold.allocations else \
                "is not subtracted from its node"
            # a terminating pod overlapping what replaces it is expected (a preemption's
            # victim beside its preemptor's held room): no operator needs telling
            (logger.debug if g.is_terminating(pod) else logger.warning)(
                "pod %s/%s on %s %s: %s", *key, node, how, "; ".join(hold.problems))
        if not hold.allocations:
            return
        if g.is_ours(pod) and g.pod_group_name(pod) is None:
            # A lone pod of ours writes no record (records.py): its binding is its record, so
            # it is held like one (released when it finishes, preemptible), not pinned.
            namespace, name = key
            owner = ("pods", namespace, name)
            record = HeldPlacement("pods", namespace, name, [name], hold.allocations)
            self.records.held.setdefault(owner, []).append(record)
            logger.debug("re-held %s/%s on %s as jobids %s", *key, node, record.jobids)
            if record.durable:  # it holds a virtual resource: its record was lost
                logger.warning("pod %s/%s on %s had no record of its virtual resources: held "
                               "from its requests and annotations (%s)", *key, node,
                               hold.describe())
                self.records.write(owner)
            return
        compute = hold.allocations.get(COMPUTE)
        self.pins[key] = Pin(compute.jobid if compute else None, node,
                             tuple(a.jobid for k, a in hold.allocations.items() if k != COMPUTE))
        logger.debug("pinned %s/%s on %s: %s", *key, node, hold.describe())

    def unpin(self, key: g.PodKey) -> None:
        pin = self.pins.pop(key, None)
        if pin is not None:
            for jobid in pin.jobids:
                self.matcher.cancel(jobid)
            self.generation += 1

    # -- caches --------------------------------------------------------------------------

    def replace(self, plural: str, items: Iterable[KubeObject]) -> None:
        """A full listing of one kind: fills the caches before start, events after."""
        if plural in DRA_PLURALS:
            self.dra.replace(plural, items)
            self.generation += 1
            return
        cache = self._cache(plural)
        fresh = {self._key(plural, obj): obj for obj in items}
        if self.started:
            for key, old in list(cache.items()):
                if key not in fresh:
                    self.handle(plural, DELETED, old)
            for obj in fresh.values():
                self.handle(plural, "MODIFIED", obj)
            return
        cache.clear()
        cache.update(fresh)
        if plural == "nodes":
            self.node_changes += 1
        if plural == NODE_RESOURCE_TOPOLOGIES.plural:
            self.numa = {}
            for name, obj in fresh.items():
                try:
                    self.numa[name] = read_nrt(obj)
                except ValueError as error:
                    logger.error("cannot use %s", error)
        if plural == "pods":
            self.pod_changes.update(fresh)
            self.unplaced = {k: p for k, p in fresh.items() if not g.is_bound(p)
                             and not g.is_finished(p) and not g.is_terminating(p)}
            self._placed_on, self._pods_per_node = {}, {}
            for key, pod in fresh.items():
                if g.is_bound(pod) and not g.is_finished(pod):
                    self._count_on(key, pod["spec"]["nodeName"])

    def _cache(self, plural: str) -> dict[Any, KubeObject]:
        caches: dict[str, dict[Any, KubeObject]] = {
            "nodes": self.nodes, "pods": self.pods, "podgroups": self.pod_groups,
            "workloads": self.workloads, NODE_RESOURCE_TOPOLOGIES.plural: self.nrts,
        }
        return caches[plural]

    @staticmethod
    def _key(plural: str, obj: KubeObject) -> Any:
        if plural in ("nodes", NODE_RESOURCE_TOPOLOGIES.plural):  # cluster-scoped
            return metadata_of(obj).get("name")
        return g.pod_key(obj)

    def handle(self, plural: str, event: str, obj: KubeObject) -> None:
        """Apply one watch event to the cache, the graph and the held allocations."""
        with self.lock:
            try:
                if event == RESYNC:
                    self.replace(plural, obj.get("items") or [])
                elif plural == "nodes":
                    self._on_node(event, obj)
                elif plural == "pods":
                    self._on_pod(event, obj)
                elif plural == "podgroups":
                    self._on_pod_group(event, obj)
                elif plural == "workloads":
                    self._on_workload(event, obj)
                elif plural == NODE_RESOURCE_TOPOLOGIES.plural:
                    self._on_nrt(event, obj)
                elif plural in DRA_PLURALS:
                    self.dra.handle(plural, event, obj)
                    self.generation += 1  # devices came or were released: try again
            except Exception:  # one bad object never stops the watch loop
                logger.exception("cannot apply %s event for %s %s", event, plural,
                                 describe(obj))

    # -- nodes ---------------------------------------------------------------------------

    def _on_node(self, event: str, obj: KubeObject) -> None:
        name = obj["metadata"]["name"]
        old = self.nodes.get(name)
        if event == DELETED or old is None or _filtered_fields(old) != _filtered_fields(obj):
            self.node_changes += 1
            self.dra.nodes_changed()
        if event == DELETED:
            self.nodes.pop(name, None)
            if self.graph.has_node(name):
                self.matcher.remove_node(name)
                logger.info("node %s removed from the graph", name)
            return
        self.nodes[name] = obj
        info = read_node(obj, numa=self.numa)
        if info is None:
            if self.graph.has_node(name) and not self.graph.node(name).down:
                self.matcher.set_node_down(name, True)
                logger.error("node %s: no new work goes there until it reads again", name)
            return
        if not self.graph.has_node(name):
            self.matcher.add_node(info)
            self.generation += 1
            logger.info("node %s added to the graph", name)
            for key, pod in self.pods.items():
                if ((pod.get("spec") or {}).get("nodeName") == name
                        and not self.records.covers(key, pod)):
                    self.pin(key, pod)
            return
        if self.graph.node(name).down:  # it was unreadable; now it reads again
            self.matcher.set_node_down(name, False)
            self.generation += 1
            logger.info("node %s reads again; work may go there", name)
        if old is not None and read_node(old, quiet=True, numa=self.numa) != info:
            # Labels, taints or the cordon changed who may go there: groups that failed
            # may fit now. The node stays in the graph either way (a pod may tolerate it).
            vertex = self.graph.node(name)
            vertex.labels = dict(info.labels)
            if vertex.schedulable != info.schedulable:
                logger.info("node %s %s", name, "schedulable again" if info.schedulable
                            else "cordoned or tainted: only pods tolerating it go there")
            vertex.schedulable = info.schedulable
            self.generation += 1
            shape = (vertex.cores, vertex.gpus, vertex.max_pods)
            moved = domains_of(self.graph.levels, info.labels) != vertex.domains
            if moved:
                logger.info("node %s moves to topology domain %s", name,
                            "/".join(domains_of(self.graph.levels, info.labels)))
            if (moved or shape != (info.cores, info.gpus, info.max_pods)
                    or vertex.memory_chunks * vertex.chunk_mib != info.memory_mib):
                self._replace_node(info)

    def _replace_node(self, info: NodeInfo) -> None:
        """Allocatable or topology domain changed: rebuild the node (in its new domain) and
        re-hold what was on it."""
        touching = [a for a in self.matcher.allocations().values()
                    if any(s.node == info.name for s in a.nodes)]
        for allocation in touching:
            self.matcher.cancel(allocation.jobid)
        self.matcher.remove_node(info.name)
        self.matcher.add_node(info)
        lost: dict[int, str] = {}
        for allocation in restore_order(touching):  # whole cores first, then the pool
            try:
                self.matcher.restore(allocation)
            except FluenceError as error:
                why = outgrown(allocation, self.graph)
                if why is None:  # the node did not shrink under it: that is unexpected
                    logger.error("node %s changed: cannot re-hold jobid %d: %s",
                                 info.name, allocation.jobid, error)
                else:
                    logger.warning("node %s shrank: jobid %d no longer fits where it was held "
                                   "(%s); its pods are held from what they request",
                                   info.name, allocation.jobid, why)
                lost[allocation.jobid] = why or str(error)
        self.generation += 1
        logger.info("node %s allocatable changed; graph updated", info.name)
        if lost and self.on_outgrown is not None:
            self.on_outgrown(lost)

    # -- pods and PodGroups --------------------------------------------------------------

    def _on_pod(self, event: str, obj: KubeObject) -> None:
        key = g.pod_key(obj)
        self.pod_changes.add(key)
        if _claim_statuses(self.pods.get(key)) != _claim_statuses(obj):
            self.generation += 1  # its template's claim was named: it may be placed now
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
            self.unplaced.pop(key, None)
        else:
            self.unplaced[key] = obj
        if gone:
            self.unpin(key)
            self._release_finished(key, obj)
        elif g.is_bound(obj) and key not in self.pins and not self.records.covers(key, obj):
            self.pin(key, obj)

    def _count_on(self, key: g.PodKey, node: str) -> None:
        if key not in self._placed_on:
            self._placed_on[key] = node
            self._pods_per_node[node] = self._pods_per_node.get(node, 0) + 1

    def _count_off(self, key: g.PodKey) -> None:
        node = self._placed_on.pop(key, None)
        if node is not None:
            self._pods_per_node[node] -= 1

    def _release_finished(self, key: g.PodKey, obj: KubeObject) -> None:
        """Cancel every placement of the pod's owners whose members all finished or went."""
        namespace, pod = key
        held = self.records.held
        for owner in g.owners_of(key, obj):
            records = held.get(owner)
            if records is None:
                continue
            remaining = []
            changed = False
            for record in records:
                if pod in record.pods and not any(self.alive(namespace, p) for p in record.pods):
                    self.cancel(record, f"every member of {owner[1]}/{owner[2]} finished")
                    changed = True
                else:
                    remaining.append(record)
            if changed:
                if remaining:
                    held[owner] = remaining
                else:  # no key left behind per finished pod: the book grew with every pod
                    del held[owner]
                self.records.write(owner)

    def _on_pod_group(self, event: str, obj: KubeObject) -> None:
        key = g.pod_key(obj)
        if event == DELETED:
            self.pod_groups.pop(key, None)
            for record in self.records.held.pop(("podgroups", *key), []):
                self.cancel(record, f"PodGroup {key[0]}/{key[1]} was deleted")
            return
        self.pod_groups[key] = obj


    def _on_nrt(self, event: str, obj: KubeObject) -> None:
        """A node's NodeResourceTopology: its zones as read (what is available in them moves
        with every pod and changes nothing here); the node is rebuilt when they change."""
        name = str(metadata_of(obj).get("name") or "")
        before = self.numa.get(name)
        if event == DELETED:
            self.nrts.pop(name, None)
            self.numa.pop(name, None)
        else:
            self.nrts[name] = obj
            try:
                self.numa[name] = read_nrt(obj)
            except ValueError as error:
                logger.error("cannot use %s: its NUMA zones are left as they were", error)
                return
        if (self.numa.get(name) == before or name not in self.nodes
                or not self.graph.has_node(name)):
            return
        info = read_node(self.nodes[name], quiet=True, numa=self.numa)
        if info is not None:
            zones = info.numa.zones if info.numa else ()
            logger.info("node %s: NUMA zones %s", name,
                        ", ".join(f"{z.name} ({z.cores} cores)" for z in zones) or "none")
            self._replace_node(info)

    def _on_workload(self, event: str, obj: KubeObject) -> None:
        key = g.pod_key(obj)
        if event == DELETED:
            self.workloads.pop(key, None)
        else:
            self.workloads[key] = obj
            self.generation += 1  # a gang waiting on its template's constraint is tried again


def _claim_statuses(pod: KubeObject | None) -> Any:
    """The claims the resourceclaim controller made for the pod's templates."""
    return None if pod is None else (pod.get("status") or {}).get("resourceClaimStatuses")


def _filtered_fields(node: KubeObject) -> tuple[Any, ...]:
    """What Kubernetes' filters read of a node (:class:`~fluence_core.feasibility.NodeFacts`):
    a kubelet's status update that changes none of it (conditions, heartbeats, images) leaves
    the feasibility snapshot as it is, instead of making it read every node again."""
    metadata, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    return (metadata.get("labels"), spec.get("taints"), spec.get("unschedulable"),
            status.get("allocatable"), status.get("capacity"))
