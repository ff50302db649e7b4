"""A kube-scheduler-shaped baseline: one pod at a time, first node with room, no gangs.

:class:`FirstFitScheduler` serves pods whose ``schedulerName`` it owns over the
same :class:`~fluence_core.kube.api.ClusterAPI` (list + watch + bind) as
Fluence. It copies the default scheduler's mechanics that matter for gangs:

* the queue is ordered by priority, then by the time a pod (re)entered it; a pod
  that did not fit goes to the back with a new timestamp and a backoff
  (1 s doubling to 10 s, kube-scheduler's defaults);
* each pod is placed on its own, on the first node (by name) with the free cpu
  and memory it requests; it knows nothing of PodGroups, so a gang can hold
  some members on nodes while the rest wait.

It is driven like :class:`~fluence_core.scheduler.core.Scheduler`: ``start()``,
then ``pump()`` + ``schedule_once()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core.kube.api import DELETED, NODES, PODS, RESYNC, ClusterAPI, KubeObject
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.models import NodeInfo
from fluence_core.pod_requests import CPU, MEMORY, pod_requests
from fluence_core.quantity import cpu_cores, parse_quantity
from fluence_core.scheduler import groups as g
from fluence_core.kube.meta import metadata_of

DEFAULT_SCHEDULER = "default-scheduler"
INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0


def cpu_and_memory(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(millicores, bytes) the pod asks for, by the one rule
    (:func:`fluence_core.pod_requests.pod_requests`, kube-scheduler's)."""
    requests = pod_requests(pod)
    return requests.get(CPU, 0), requests.get(MEMORY, 0)


@dataclass
class _Queued:
    since: float
    serial: int
    attempts: int = 0
    backoff_until: float = 0.0


class FirstFitScheduler:
    """Per-pod first-fit placement by free cpu/memory (see the module docstring)."""

    def __init__(self, cluster: ClusterAPI, *, scheduler_name: str = DEFAULT_SCHEDULER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.scheduler_name = scheduler_name
        self.clock = clock
        self.nodes: dict[str, NodeInfo] = {}
        self.free: dict[str, list[int]] = {}
        self.pods: dict[g.PodKey, KubeObject] = {}
        self.charged: dict[g.PodKey, tuple[str, int, int]] = {}
        self.queue: dict[g.PodKey, _Queued] = {}
        self._versions: dict[str, str] = {}
        self._serial = 0

    # -- the view -----------------------------------------------------------------

    def start(self) -> None:
        for resource in (NODES, PODS):
            listing = self.cluster.list(resource)
            self._versions[resource.plural] = listing.resource_version
            for obj in listing.items:
                self.handle(resource.plural, "ADDED", obj)

    def pump(self) -> int:
        applied = 0
        for resource in (NODES, PODS):
            for event, obj in self.cluster.watch(
                resource, resource_version=self._versions.get(resource.plural), timeout=0
            ):
                version = metadata_of(obj).get("resourceVersion")
                if version:
                    self._versions[resource.plural] = version
                if event == RESYNC:
                    for item in obj.get("items") or []:
                        self.handle(resource.plural, "MODIFIED", item)
                else:
                    self.handle(resource.plural, event, obj)
                applied += 1
        return applied

    def handle(self, plural: str, event: str, obj: KubeObject) -> None:
        if plural == "nodes":
            info = NodeInfo.from_kube(obj)
            if event == DELETED:
                self.nodes.pop(info.name, None)
                self.free.pop(info.name, None)
                return
            old = self.nodes.get(info.name)
            self.nodes[info.name] = info
            allocatable = (
                (obj.get("status") or {}).get("allocatable")
                or (obj.get("status") or {}).get("capacity")
                or {}
            )
            total = [
                int(cpu_cores(allocatable.get("cpu", 0)) * 1000),
                int(parse_quantity(allocatable.get("memory", 0))),
            ]
            if old is None or info.name not in self.free:
                used = [0, 0]
                for node, cpu, memory in self.charged.values():
                    if node == info.name:
                        used[0] += cpu
                        used[1] += memory
                self.free[info.name] = [total[0] - used[0], total[1] - used[1]]
            return
        key = g.pod_key(obj)
        if event == DELETED or g.is_finished(obj):
            if event == DELETED:
                self.pods.pop(key, None)
            else:
                self.pods[key] = obj
            self.queue.pop(key, None)
            self._uncharge(key)
            return
        self.pods[key] = obj
        bound_to = (obj.get("spec") or {}).get("nodeName")
        if bound_to:
            self.queue.pop(key, None)
            if key not in self.charged:
                self._charge(key, str(bound_to), *cpu_and_memory(obj))
        elif (obj.get("spec") or {}).get(
            "schedulerName"
        ) == self.scheduler_name and key not in self.queue:
            self._serial += 1
            self.queue[key] = _Queued(self.clock(), self._serial)

    def _charge(self, key: g.PodKey, node: str, cpu: int, memory: int) -> None:
        self.charged[key] = (node, cpu, memory)
        if node in self.free:
            self.free[node][0] -= cpu
            self.free[node][1] -= memory

    def _uncharge(self, key: g.PodKey) -> None:
        charged = self.charged.pop(key, None)
        if charged is not None and charged[0] in self.free:
            self.free[charged[0]][0] += charged[1]
            self.free[charged[0]][1] += charged[2]

    # -- scheduling ---------------------------------------------------------------

    def next_wakeup(self) -> float | None:
        """The earliest time a backed-off pod may be tried again (None: nothing waits)."""
        now = self.clock()
        later = [q.backoff_until for q in self.queue.values() if q.backoff_until > now]
        return min(later) if later else None

    def schedule_once(self) -> dict[str, str]:
        """Try every queued pod whose backoff expired, in queue order; returns what was bound."""
        now = self.clock()
        bound: dict[str, str] = {}
        ready = [(key, q) for key, q in self.queue.items()
                 if q.backoff_until <= now and not g.is_gated(self.pods.get(key, {}))]
        ready.sort(
            key=lambda item: (-g.priority(self.pods[item[0]]), item[1].since, item[1].serial)
        )
        names = sorted(n for n, info in self.nodes.items() if info.schedulable)
        for key, queued in ready:
            pod = self.pods[key]
            cpu, memory = cpu_and_memory(pod)
            node = next(
                (n for n in names if self.free[n][0] >= cpu and self.free[n][1] >= memory), None
            )
            if node is None:
                queued.attempts += 1
                queued.since = now  # back of the queue, as the unschedulable pods are
                self._serial += 1
                queued.serial = self._serial
                queued.backoff_until = now + min(
                    INITIAL_BACKOFF * 2 ** (queued.attempts - 1), MAX_BACKOFF
                )
                continue
            namespace, name = key
            try:
                self.cluster.bind(namespace, name, node, uid=metadata_of(pod).get("uid"))
            except ApiError as error:
                logger.debug("first-fit: binding %s/%s failed: %s", namespace, name, error)
                continue
            self.queue.pop(key, None)
            self._charge(key, node, cpu, memory)
            bound[f"{namespace}/{name}"] = node
        return bound
