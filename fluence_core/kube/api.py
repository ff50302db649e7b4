"""The boundary between Fluence and Kubernetes: one protocol, one resource table.

The scheduler, the webhook, the sidecar and the simulator are typed against
:class:`ClusterAPI`, never against the ``kubernetes`` client. Two classes
satisfy it: :class:`fluence_core.kube.client.KubeCluster` (a real API server) and
:class:`fluence_core.kube.fake.FakeCluster` (in memory, for tests and
``fluence sim``). Objects cross the boundary as plain JSON dicts, exactly as
the API server sends them, so code past this line can be fed from YAML files
as easily as from a cluster.

Resources are named by their plural (``"pods"``, ``"podgroups"``, ...) and
looked up in :data:`RESOURCES`; a caller needing one more kind passes its own
:class:`Resource` instead of a name, without touching either implementation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable
from fluence_core import names
from fluence_core.kube.meta import metadata_of

KubeObject: TypeAlias = dict[str, Any]
"""One Kubernetes object (or Status, or List) as decoded JSON: Fluence's one name for it."""

Patch: TypeAlias = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""A JSON merge patch (a mapping) or a JSON patch (a list of operations)."""

PatchType: TypeAlias = Literal["merge", "json"]

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""The pod phases after which a pod runs no more and holds nothing."""

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
RESYNC: Final = "RESYNC"
"""Synthetic watch event: history was lost (410 Gone), the object is a fresh
List (``items`` + ``metadata.resourceVersion``). Callers rebuild their view from
it; the watch continues after it without a gap."""

WatchEvent: TypeAlias = tuple[str, KubeObject]
"""``(type, object)`` with type one of ADDED, MODIFIED, DELETED, RESYNC."""


class Cancellation:
    """Ends the watches given it, from any thread, at once.

    A watch blocks its thread until the next event arrives, for as long as its
    request lasts: a thread that only checked a flag between events could not stop
    before then. So a watch registers how to wake itself (the real client shuts its
    streaming response's socket; the fake notifies its waiters) and :meth:`cancel`
    runs every such callback, and any registered later at once. One cancellation may
    end several watches; it cannot be undone.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Cancel, waking every watch given this cancellation (a second call does nothing)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Have :meth:`cancel` call ``callback`` (now, when already cancelled); the function
        returned forgets it, once the watch it wakes has ended."""
        with self._lock:
            if not self._cancelled:
                key, self._next = self._next, self._next + 1
                self._callbacks[key] = callback
                return lambda: self._forget(key)
        callback()
        return lambda: None

    def _forget(self, key: int) -> None:
        with self._lock:
            self._callbacks.pop(key, None)


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API and how it behaves.

    ``status_subresource`` says the main endpoint ignores ``status`` and
    ``patch_status`` writes it; ``reset_status_on_create`` says the server
    drops a client-supplied status on create (pods, PodGroups) rather than
    keeping it (nodes, which tests create with their capacity).
    """

    plural: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    status_subresource: bool = False
    reset_status_on_create: bool = False

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The REST path: ``/api/v1/...`` for the core group, ``/apis/g/v/...`` otherwise."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource is not None:
                base += f"/{subresource}"
        return base


PODS: Final = Resource("pods", "Pod", status_subresource=True, reset_status_on_create=True)
NODES: Final = Resource("nodes", "Node", namespaced=False, status_subresource=True)
EVENTS: Final = Resource("events", "Event")
NAMESPACES: Final = Resource("namespaces", "Namespace", namespaced=False, status_subresource=True)
SERVICE_ACCOUNTS: Final = Resource("serviceaccounts", "ServiceAccount")
PODGROUPS: Final = Resource(
    "podgroups", "PodGroup", group="scheduling.k8s.io", version="v1alpha2",
    status_subresource=True, reset_status_on_create=True,
)
WORKLOADS: Final = Resource("workloads", "Workload", group="scheduling.k8s.io", version="v1alpha2")
PRIORITY_CLASSES: Final = Resource(
    "priorityclasses", "PriorityClass", group="scheduling.k8s.io", namespaced=False
)
JOBS: Final = Resource(
    "jobs", "Job", group="batch", status_subresource=True, reset_status_on_create=True
)
LEASES: Final = Resource("leases", "Lease", group="coordination.k8s.io")
ROLES: Final = Resource("roles", "Role", group="rbac.authorization.k8s.io")
ROLE_BINDINGS: Final = Resource("rolebindings", "RoleBinding", group="rbac.authorization.k8s.io")
CLUSTER_ROLES: Final = Resource(
    "clusterroles", "ClusterRole", group="rbac.authorization.k8s.io", namespaced=False
)
CLUSTER_ROLE_BINDINGS: Final = Resource(
    "clusterrolebindings", "ClusterRoleBinding", group="rbac.authorization.k8s.io",
    namespaced=False,
)
TOKEN_REVIEWS: Final = Resource(
    "tokenreviews", "TokenReview", group="authentication.k8s.io", namespaced=False
)
"""Created, never stored: the answer's ``status`` says whom a token belongs to."""
CONFIGMAPS: Final = Resource("configmaps", "ConfigMap")
SECRETS: Final = Resource("secrets", "Secret")
SERVICES: Final = Resource("services", "Service", status_subresource=True)
JOBSETS: Final = Resource(
    "jobsets", "JobSet", group="jobset.x-k8s.io", version="v1alpha2", status_subresource=True
)
NODE_RESOURCE_TOPOLOGIES: Final = Resource(
    "noderesourcetopologies", "NodeResourceTopology", group=names.NRT_GROUP, version="v1alpha2",
    namespaced=False)
"""A node's NUMA zones, as the NFD topology-updater publishes them (one per node)."""
TRAINJOBS: Final = Resource("trainjobs", "TrainJob", group="trainer.kubeflow.org",
                            version="v1alpha1")
"""Kubeflow Trainer's: read for the topology a TrainJob states (its JobSet's Jobs' gangs)."""
PERSISTENT_VOLUME_CLAIMS: Final = Resource(
    "persistentvolumeclaims", "PersistentVolumeClaim", status_subresource=True)
PERSISTENT_VOLUMES: Final = Resource(
    "persistentvolumes", "PersistentVolume", namespaced=False, status_subresource=True)
STORAGE_CLASSES: Final = Resource(
    "storageclasses", "StorageClass", group="storage.k8s.io", namespaced=False)
RESOURCE_SLICES: Final = Resource(
    "resourceslices", "ResourceSlice", group="resource.k8s.io", namespaced=False)
"""A DRA driver's devices, in pools; cluster-scoped, written by the driver."""
DEVICE_CLASSES: Final = Resource(
    "deviceclasses", "DeviceClass", group="resource.k8s.io", namespaced=False)
RESOURCE_CLAIMS: Final = Resource(
    "resourceclaims", "ResourceClaim", group="resource.k8s.io", status_subresource=True,
    reset_status_on_create=True)
"""A request for devices; the scheduler writes ``status.allocation`` and ``reservedFor``."""
RESOURCE_CLAIM_TEMPLATES: Final = Resource(
    "resourceclaimtemplates", "ResourceClaimTemplate", group="resource.k8s.io")
MUTATING_WEBHOOKS: Final = Resource(
    "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
    group="admissionregistration.k8s.io", namespaced=False,
)

RESOURCES: Final[Mapping[str, Resource]] = {
    r.plural: r
    for r in (
        PODS, NODES, EVENTS, NAMESPACES, SERVICE_ACCOUNTS, PODGROUPS, WORKLOADS,
        PRIORITY_CLASSES, JOBS, LEASES, ROLES, ROLE_BINDINGS, CLUSTER_ROLES,
        CLUSTER_ROLE_BINDINGS, MUTATING_WEBHOOKS, CONFIGMAPS, SECRETS, SERVICES, JOBSETS,
        TRAINJOBS, TOKEN_REVIEWS, NODE_RESOURCE_TOPOLOGIES,
        PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES,
        RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES,
    )
}
"""Every kind Fluence touches, by plural."""

ResourceRef: TypeAlias = str | Resource
"""A plural from :data:`RESOURCES`, or a :class:`Resource` for anything else."""


def resolve(resource: ResourceRef) -> Resource:
    """The :class:`Resource` behind a plural name; a KeyError names the unknown one."""
    if isinstance(resource, Resource):
        return resource
    try:
        return RESOURCES[resource]
    except KeyError:
        raise KeyError(f"unknown resource {resource!r}; known: {sorted(RESOURCES)}") from None


@dataclass(frozen=True)
class ObjectList:
    """A list response: the items and the resourceVersion to watch from."""

    items: list[KubeObject] = field(default_factory=list)
    resource_version: str = ""


EVENT_COMPONENT: Final = "fluence"
"""``source.component`` / ``reportingComponent`` of the Events Fluence posts."""


def build_event(involved: Mapping[str, Any], type: str, reason: str, message: str,
                now: datetime, *, action: str | None = None, instance: str = "") -> KubeObject:
    """A core/v1 Event body about ``involved``, shared by both implementations.

    Named ``<object>.<nanoseconds hex>`` as client-go names them. An object
    without a namespace (a Node) gets its Event in ``default``, the only
    namespace the API server accepts for it.
    """
    metadata = metadata_of(involved)
    name = str(metadata.get("name") or "unknown")
    namespace = metadata.get("namespace")
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    nanos = int(now.timestamp() * 1_000_000_000)
    reference: KubeObject = {
        "apiVersion": involved.get("apiVersion", ""),
        "kind": involved.get("kind", ""),
        "name": name,
        "uid": metadata.get("uid", ""),
        "resourceVersion": metadata.get("resourceVersion", ""),
    }
    if namespace:
        reference["namespace"] = namespace
    event: KubeObject = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{nanos:x}", "namespace": namespace or "default"},
        "involvedObject": reference,
        "type": type,
        "reason": reason,
        "message": message,
        "source": {"component": EVENT_COMPONENT},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": instance,
    }
    if action:
        event["action"] = action
    return event


Propagation = Literal["Background", "Foreground", "Orphan"]
"""A delete's ``propagationPolicy``."""


@runtime_checkable
class ClusterAPI(Protocol):
    """What Fluence needs of a Kubernetes API server.

    Errors are the classes of :mod:`fluence_core.kube.errors`: ``NotFound``
    (404), ``Conflict`` (409: already exists, stale resourceVersion, second
    binding, binding a gated pod), ``Gone`` (410), ``ApiError`` otherwise.
    ``namespace`` is ignored for cluster-scoped kinds; for ``list``/``watch``
    None means all namespaces.
    """

    def get(
        self, resource: ResourceRef, name: str, namespace: str | None = None
    ) -> KubeObject | None:
        """The object, or None when it does not exist."""
        ...

    def list(self, resource: ResourceRef, namespace: str | None = None, *,
             label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        """Every matching object and the collection's resourceVersion."""
        ...

    def watch(self, resource: ResourceRef, namespace: str | None = None, *,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None,
              timeout: float | None = None,
              cancel: Cancellation | None = None) -> Iterator[WatchEvent]:
        """Changes after ``resource_version`` (without one: ADDED for what exists now, then
        changes).

        Bookmarks are consumed, never yielded. When history is gone (410) the
        watch re-lists and yields one RESYNC event, then carries on. The
        generator ends after ``timeout`` seconds (None: never; 0: deliver what
        is already pending and stop — the way tests drive it without threads),
        or as soon as ``cancel`` is cancelled, even while it waits for an event.
        """
        ...

    def create(self, resource: ResourceRef, body: Mapping[str, Any],
               namespace: str | None = None) -> KubeObject:
        """Create and return the stored object (Conflict if the name is taken)."""
        ...

    def replace(self, resource: ResourceRef, body: Mapping[str, Any],
                namespace: str | None = None) -> KubeObject:
        """PUT the whole object; a stale ``metadata.resourceVersion`` raises Conflict (leases)."""
        ...

    def patch(self, resource: ResourceRef, name: str, patch: Patch,
              namespace: str | None = None, *, patch_type: PatchType = "merge") -> KubeObject:
        """Apply a merge patch (mapping) or JSON patch (list) to the object, not its status."""
        ...

    def patch_status(self, resource: ResourceRef, name: str, patch: Patch,
                     namespace: str | None = None, *,
                     patch_type: PatchType = "merge") -> KubeObject:
        """Apply a patch through the ``status`` subresource (only status changes)."""
        ...

    def delete(self, resource: ResourceRef, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None,
               propagation: Propagation | None = None) -> bool:
        """Delete; False when it was already gone. ``propagation``: what the garbage collector
        does with the object's dependents (the API server's default otherwise: Jobs orphan
        theirs)."""
        ...

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        """Bind the pod to the node through ``pods/binding`` (Conflict if bound or gated)."""
        ...

    def post_event(self, involved: Mapping[str, Any], type: str, reason: str, message: str, *,
                   action: str | None = None) -> KubeObject:
        """Record a core/v1 Event about ``involved`` (any object dict) and return it."""
        ...
