"""Can the cluster support a new hybrid group? The ledger, the budget and the verdict.

:class:`AdmissionControl` is given the cluster it reads and the clock its
in-memory promises age by; nothing here is process-wide, so the webhook and
each ``fluence sim`` run hold controls of their own.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fluence_admission.settings import AdmissionSettings
from fluence_core.api import (
    NODES,
    PODS,
    PRIORITY_CLASSES,
    AdmissionContext,
    ClusterAPI,
    Handler,
    JsonPatch,
    NodeInfo,
    Switch,
    annotations_of,
    conditions,
    group_of,
    group_size,
    is_fluence_pod,
    is_quantum_pod,
    logger,
    metadata_of,
    names,
    pod_requests,
    pod_spec,
    pointer,
)

PENDING_GRACE = 15.0
"""Seconds an in-memory promise bridges admission and storage: the webhook answers within
its 10 s timeout and the API server stores the pod right after, with the promise on it
(the durable record). Past this, a pod that is not stored never will be, so its promise
is given back instead of starving real groups."""
_FLUENCE_CONTAINERS = frozenset({names.SIDECAR_CONTAINER, names.STAGE_CONTAINER})
_TERMINAL = frozenset({"Succeeded", "Failed"})

GroupKey = tuple[str, str]
PendingKey = tuple[str, ...]
"""A group's key, or ``(namespace, "request", uid)`` for a lone pod: its own admission request,
so a second pod re-using a name is judged afresh."""


@dataclass(frozen=True)
class _Promise:
    needed: int
    since: float
    per_pod: int
    record: GroupKey
    """Where the cluster's record of it will be (the group, or ``pod:<name>``)."""


def group_key(pod: Mapping[str, Any], namespace: str) -> GroupKey:
    """A group by its label; a lone pod is a group of its own (by name)."""
    group = group_of(pod)
    if group:
        return namespace, group
    meta = metadata_of(pod)
    return namespace, "pod:" + str(
        meta.get("name") or meta.get("generateName") or meta.get("uid") or "?"
    )


def pod_cores(pod: Mapping[str, Any]) -> int:
    """The cores the pod's CPU covers, rounded up (a 500m pod takes CPU too), without the
    containers Fluence adds (stable on re-invocation); sized by the one rule,
    :func:`~fluence_core.api.pod_requests`."""
    own = dict(pod_spec(pod))
    own["containers"] = [c for c in own.get("containers") or []
                         if c.get("name") not in _FLUENCE_CONTAINERS]
    own["initContainers"] = [c for c in own.get("initContainers") or []
                             if c.get("name") not in _FLUENCE_CONTAINERS]
    return -(-_millicores({"metadata": metadata_of(pod), "spec": own}) // 1000)


def _millicores(pod: Mapping[str, Any]) -> int:
    return pod_requests(pod).get("cpu", 0)


def is_protected(pod: Mapping[str, Any]) -> bool:
    """Protected pods are Fluence's: the webhook strips a mark users set themselves."""
    return is_fluence_pod(pod) and str(
        annotations_of(pod).get(names.PROTECTED_ANNOTATION, "")).lower() == "true"


@dataclass(frozen=True)
class Budget:
    """The numbers behind a verdict, in whole cores (free and preemptible CPU, counted in
    millicores by the one rule, rounded down)."""

    free: int
    preemptible: int
    reserved: int
    promised: int

    @property
    def available(self) -> int:
        return self.free + self.preemptible - self.reserved - self.promised

    def explain(self) -> str:
        return (f"free {self.free} + preemptible {self.preemptible} - reserved {self.reserved}"
                f" - promised to admitted groups {self.promised}")


class AdmissionControl:
    """Admits a hybrid group only when its cores will be there when its quantum task runs.

    ``cluster`` is what the budget is read from; ``clock`` (seconds) ages the
    promises of groups admitted but not yet stored (:data:`PENDING_GRACE`).
    """

    def __init__(self, cluster: ClusterAPI, settings: AdmissionSettings, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.enabled = settings.control == Switch.ON
        self.reserve = settings.reserve_cores
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[PendingKey, _Promise] = {}

    # -- the verdict --------------------------------------------------------

    def admit(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> str | None:
        """The refusal message for ``pod``, or None to admit it."""
        if not self.enabled or not is_quantum_pod(pod):
            return None
        namespace = str(ctx.namespace or metadata_of(pod).get("namespace") or "default")
        key = group_key(pod, namespace)
        grouped = group_of(pod) is not None
        pending_key: PendingKey = key if grouped else (namespace, "request", ctx.uid)
        with self._lock:
            per_pod = pod_cores(pod)
            known = self._pending.get(pending_key)
            if known is not None and per_pod <= known.per_pod:
                return None  # a sibling of the same shape, or a re-invocation
            if known is None and grouped and self._group_exists(key):
                return None  # a sibling of a group admitted before (a restart between)
            size = group_size(pod, ctx) if grouped else 1
            needed = size * per_pod
            budget = self.budget(self._priority_of(pod), exclude=pending_key)
            if needed > budget.available:
                what = f"group {key[1]}" if group_of(pod) else f"pod {key[1][4:]}"
                logger.info("admission: refused %s/%s: needs %d, %d available", namespace, key[1],
                            needed, budget.available)
                return (f"fluence admission control: {what} needs {needed} cores "
                        f"({size} pods x {per_pod}) but {max(0, budget.available)} are available "
                        f"({budget.explain()})")
            if not ctx.dry_run:
                self._pending[pending_key] = _Promise(needed, self._clock(), per_pod, key)
        return None

    # -- the cluster's side -------------------------------------------------

    def budget(self, priority: int, *, exclude: PendingKey | None = None) -> Budget:
        """What a group of ``priority`` may count on now (``exclude``: its own promise)."""
        cluster = self.cluster
        nodes = []
        for raw in cluster.list(NODES).items:
            try:
                nodes.append(NodeInfo.from_kube(raw))
            except ValueError as error:  # a node nobody can use adds no cores; judge the rest
                logger.warning("admission: %s", error)
        capacity = sum(n.millicores or 1000 * n.cores for n in nodes if n.schedulable)
        schedulable = {n.name for n in nodes if n.schedulable}
        used = preemptible = 0  # millicores
        promises: dict[GroupKey, int] = {}
        bound_by_group: dict[GroupKey, int] = {}
        for pod in cluster.list(PODS).items:
            if (pod.get("status") or {}).get("phase") in _TERMINAL:
                continue
            node = pod_spec(pod).get("nodeName")
            millicores = _request_millicores(pod)
            protected = is_protected(pod)
            namespace = str(metadata_of(pod).get("namespace") or "default")
            if node:
                if node in schedulable:
                    used += millicores
                    if not protected and int(pod_spec(pod).get("priority") or 0) < priority:
                        preemptible += millicores
            if protected:
                key = group_key(pod, namespace)
                raw = annotations_of(pod).get(names.PROMISED_CORES_ANNOTATION)
                try:
                    promises[key] = max(promises.get(key, 0), int(str(raw)))
                except (TypeError, ValueError):
                    pass
                if node:
                    bound_by_group[key] = bound_by_group.get(key, 0) + -(-millicores // 1000)
        outstanding = {
            key: max(0, total - bound_by_group.get(key, 0)) for key, total in promises.items()
        }
        now = self._clock()
        pending: dict[PendingKey, int] = {}
        for key, promise in list(self._pending.items()):
            if promise.record in promises or now - promise.since > PENDING_GRACE:
                del self._pending[key]  # the cluster has the record now (or the pods never came)
            else:
                pending[key] = promise.needed
        if exclude is not None:
            pending.pop(exclude, None)
            if len(exclude) == 2:
                outstanding.pop((exclude[0], exclude[1]), None)
        return Budget(free=max(0, capacity - used) // 1000, preemptible=preemptible // 1000,
                      reserved=self.reserve,
                      promised=sum(outstanding.values()) + sum(pending.values()))

    def _group_exists(self, key: GroupKey) -> bool:
        namespace, group = key
        if group.startswith("pod:"):
            return False
        return bool(
            self.cluster.list(PODS, namespace, label_selector=f"{names.GROUP_LABEL}={group}").items
        )

    def _priority_of(self, pod: Mapping[str, Any]) -> int:
        found = self.cluster.get(PRIORITY_CLASSES, names.QUANTUM_PRIORITY_CLASS)
        if found is not None:
            return int(found.get("value") or 0)
        return int(pod_spec(pod).get("priority") or 0)


def promised_cores(pod: Mapping[str, Any], ctx: AdmissionContext) -> int:
    """The promise a quantum pod carries: N x its cores."""
    size = group_size(pod, ctx) if group_of(pod) else 1
    return size * pod_cores(pod)


def _request_millicores(pod: Mapping[str, Any]) -> int:
    """The pod's CPU by the one rule; a pod that cannot be read counts as one core."""
    try:
        return _millicores(pod)
    except ValueError:
        return 1000


class MarkHandler(Handler):
    """``admission-mark``: the members of a hybrid group carry the protected mark and their
    group's promise; nobody else may carry either.

    A member is a pod the quantum split made, scout or worker, and the split's seal is the
    only proof of it: the webhook removes every seal it did not make before any handler runs,
    while a role label, a gate or a group label are the tenant's to write. A lone pod that
    asks for a qubit, or any pod that merely calls itself a worker, is admitted unmarked
    (admission control still judges whether the cluster can take it)."""

    name = "admission-mark"
    order = 15  # after the quantum split (10), which seals the pods it makes
    match_condition = conditions.any_of(
        conditions.is_quantum(), conditions.has_annotation(names.PROTECTED_ANNOTATION),
        conditions.has_annotation(names.PROMISED_CORES_ANNOTATION))
    """Quantum pods, and any pod carrying either mark: a forged one is stripped, so a pod
    with one never skips the webhook."""

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return is_quantum_pod(pod) or any(
            key in annotations_of(pod) for key in (names.PROTECTED_ANNOTATION,
                                                        names.PROMISED_CORES_ANNOTATION))

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        annotations = annotations_of(pod)
        if names.SPLIT_SEAL_ANNOTATION not in annotations:
            return [{"op": "remove", "path": pointer("metadata", "annotations", key)}
                    for key in (names.PROTECTED_ANNOTATION, names.PROMISED_CORES_ANNOTATION)
                    if key in annotations]
        wanted = {names.PROTECTED_ANNOTATION: "true",
                  names.PROMISED_CORES_ANNOTATION: str(promised_cores(pod, ctx))}
        return [{"op": "add", "path": pointer("metadata", "annotations", key), "value": value}
                for key, value in wanted.items() if annotations.get(key) != value]
