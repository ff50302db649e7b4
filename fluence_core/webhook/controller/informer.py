"""Watched copies of the objects admission asks about, so that no request has to read them.

A grouped Job's admission needs its group's PodGroup (one gang per group name: another
size is refused), and its PodGroup's write needs the stored Job (the uid its owner
reference needs). Read through the webhook's rate-limited client, shared with its
writes, those reads kept a review waiting on the limiter for nearly all its time under
load (docs/admission-cost.md). An :class:`Informer` lists its kind once, then follows
the watch from that list's resourceVersion on a thread of its own; a lookup answers
from memory.

What stays true:

* a lookup is as fresh as the watch (normally milliseconds behind the API
  server). What this webhook made itself in the last seconds it knows from
  :attr:`~fluence_core.webhook.admission.base.AdmissionContext.recent` anyway;
* until the first list arrived, and from a failed watch until the next list
  succeeds, a lookup says *unknown* and the caller reads as it did before, so
  a broken watch costs speed, never an answer;
* memory: only a projection of each object (``keep``), never the whole object.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Final, Generic, Iterable, Mapping, TypeVar

from fluence_core import names
from fluence_core.kube.api import (
    ADDED,
    DELETED,
    JOBS,
    PODGROUPS,
    PODS,
    RESYNC,
    Cancellation,
    ClusterAPI,
    Resource,
    ResourceRef,
    resolve,
)
from fluence_core.kube.errors import ApiError
from fluence_core.kube.meta import metadata_or_none
from fluence_core.log import logger
from fluence_core.stated_topology import stated_annotations

T = TypeVar("T")
Key = tuple[str, str]
"""(namespace, name)"""

WATCH_SECONDS = 60.0
"""How long one watch request lasts before the next resumes from its resourceVersion."""
RETRY_SECONDS = 1.0
"""Wait after a failed list or watch before listing again; doubled while it keeps failing
(a refused list, 403, is refused every time), up to :data:`RETRY_MAX_SECONDS`."""
RETRY_MAX_SECONDS = 30.0
UNSCHEDULED: Final = "spec.nodeName="
"""The field selector of pods no node holds yet."""


def key_of(obj: Any) -> Key:
    """``(namespace, name)`` of ``obj``; ValueError when it has no metadata object."""
    meta = metadata_or_none(obj)
    if meta is None:
        raise ValueError("no metadata object")
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


UNREADABLE: Final = (AttributeError, TypeError, ValueError, KeyError)
"""What reading an object of an unexpected shape raises (``keep``, :func:`key_of`)."""


class Informer(Generic[T]):
    """A copy of every ``resource`` object matching ``label_selector`` (all namespaces),
    each kept as ``keep(obj)``; :meth:`start` follows the API server on a daemon thread,
    :meth:`sync` and :meth:`apply` are the steps (tests drive them without threads).
    """

    def __init__(self, cluster: ClusterAPI, resource: ResourceRef,
                 keep: Callable[[Mapping[str, Any]], T], *,
                 label_selector: str | None = None, field_selector: str | None = None,
                 namespace: str | None = None) -> None:
        self.cluster = cluster
        self.namespace = namespace
        """None: every namespace (``fluence webhook``); one: a test's webhook's own."""
        self.resource = resolve(resource)
        self.keep = keep
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.listeners: list[Callable[[str, Mapping[str, Any]], None]] = []
        """Called with every stored object the informer sees (listed, added or modified;
        never deleted), whole, on the informer's thread, before it is kept: the webhook's
        controller (:mod:`.controller`) acts on stored objects from here."""
        self._lock = threading.Lock()
        self._objects: dict[Key, T] = {}
        self._unreadable: set[Key] = set()
        """Objects whose copy could not be made: looked up as unknown, so callers read them."""
        self.watch_seconds = WATCH_SECONDS
        """Seconds of one watch request of :meth:`start`'s thread, which then resumes from
        the last version seen."""
        self._version: str | None = None
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._cancel = Cancellation()
        """Ends the watch in flight when :meth:`stop` is called; a new one per :meth:`start`."""
        self._thread: threading.Thread | None = None

    @property
    def synced(self) -> bool:
        """Whether lookups answer: the first list arrived and the watch has not failed since."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def lookup(self, namespace: str, name: str) -> tuple[bool, T | None]:
        """``(True, kept)`` or ``(True, None)`` (no such object) when :attr:`synced`;
        ``(False, None)`` otherwise: unknown, ask the API server."""
        if not self._synced.is_set():
            return False, None
        with self._lock:
            if (namespace, name) in self._unreadable:
                return False, None
            return True, self._objects.get((namespace, name))

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def values(self, namespace: str) -> list[T] | None:
        """Every kept object of ``namespace``; None when not :attr:`synced` (ask the API
        server)."""
        if not self._synced.is_set():
            return None
        with self._lock:
            return [kept for (ns, _), kept in self._objects.items() if ns == namespace]

    def _tell(self, event: str, obj: Any) -> None:
        """Hand a stored object to the listeners; none of their failures stops the watch."""
        if not isinstance(obj, Mapping) or not self.listeners or self._stop.is_set():
            return  # stopped: a watch still draining acts on nothing
        if "kind" not in obj:  # a list's items carry neither: listeners read them as events
            obj = {"apiVersion": self.resource.api_version, "kind": self.resource.kind, **obj}
        for listener in self.listeners:
            try:
                listener(event, obj)
            except Exception:  # noqa: BLE001 - a bad object or a bug: logged, the watch goes on
                logger.exception("webhook: acting on a stored %s failed: %.200r",
                                 self.resource.kind, obj)

    # -- the steps ----------------------------------------------------------------------

    def sync(self) -> None:
        """List everything afresh; lookups answer from then on."""
        listed = self.cluster.list(self.resource, self.namespace,
                                   label_selector=self.label_selector,
                                   field_selector=self.field_selector)
        self._replace(listed.items, listed.resource_version or None)
        self._synced.set()
        for item in listed.items:
            self._tell(ADDED, item)

    def apply(self, event: str, obj: Mapping[str, Any]) -> None:
        """One watch event: ADDED/MODIFIED keep the object, DELETED drops it, RESYNC (the
        watch's history was gone and it listed again) replaces everything. An object of an
        unexpected shape is kept as unreadable (looked up as unknown: callers read it, as
        without the informer), or skipped when it has no name; neither stops the watch."""
        meta = metadata_or_none(obj)
        version = meta.get("resourceVersion") if meta is not None else None
        if event == RESYNC:
            items = obj.get("items") if isinstance(obj, Mapping) else None
            self._replace(items if isinstance(items, list) else [], version)
            for item in items if isinstance(items, list) else []:
                self._tell(ADDED, item)
            return
        if event != DELETED:
            self._tell(event, obj)
        try:
            key = key_of(obj)
        except ValueError as error:
            self._skip(obj, error)
            return
        kept: T | None = None
        if event != DELETED:
            try:
                kept = self.keep(obj)
            except UNREADABLE as error:
                self._skip(obj, error)
        with self._lock:
            self._objects.pop(key, None)
            self._unreadable.discard(key)
            if event != DELETED:
                if kept is None:
                    self._unreadable.add(key)
                else:
                    self._objects[key] = kept
            if version:
                self._version = str(version)

    def _replace(self, items: Iterable[Any], version: str | None) -> None:
        objects: dict[Key, T] = {}
        unreadable: set[Key] = set()
        for item in items:
            try:
                key = key_of(item)
            except ValueError as error:
                self._skip(item, error)
                continue
            try:
                objects[key] = self.keep(item)
            except UNREADABLE as error:
                self._skip(item, error)
                unreadable.add(key)
        with self._lock:
            self._objects, self._unreadable = objects, unreadable
            if version:
                self._version = str(version)

    def _skip(self, obj: Any, error: Exception) -> None:
        logger.warning("webhook: the %s informer cannot read an object (%s), so lookups of it"
                       " read the API server: %.200r", self.resource.plural, error, obj)

    def follow(self, timeout: float | None = WATCH_SECONDS) -> None:
        """Apply the watch's events from the last version seen, for ``timeout`` seconds."""
        for event, obj in self.cluster.watch(self.resource, self.namespace,
                                             resource_version=self._version,
                                             label_selector=self.label_selector,
                                             field_selector=self.field_selector,
                                             timeout=timeout, cancel=self._cancel):
            self.apply(event, obj)
            if self._stop.is_set():
                return

    # -- the thread ---------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._cancel = Cancellation()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"informer-{self.resource.plural}")
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread: the watch in flight is cancelled (its response closed), so the
        thread ends as soon as the event it may be applying is; ``timeout`` bounds the wait
        for a listener still acting on one."""
        self._stop.set()
        self._cancel.cancel()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        delay = RETRY_SECONDS
        unserved = False  # said once that the API server does not serve the kind (a CRD)
        while not self._stop.is_set():
            try:
                if not self._synced.is_set():
                    self.sync()
                    delay = RETRY_SECONDS
                self.follow(self.watch_seconds)
            except Exception as error:  # noqa: BLE001 - a broken watch only costs speed
                self._synced.clear()  # unknown until the next list: callers read meanwhile
                if self._stop.is_set():
                    return
                missing = isinstance(error, ApiError) and error.status == 404
                if missing and unserved:
                    logger.debug("webhook: %s still not served", self.resource.plural)
                elif missing:
                    unserved = True
                    logger.info("webhook: the API server does not serve %s (CRD not installed?);"
                                " looking again every %.0f s", self.resource.plural,
                                RETRY_MAX_SECONDS)
                else:
                    logger.warning("webhook: watching %s failed (%s); reading them directly"
                                   " until the next list, in %.0f s", self.resource.plural,
                                   error, delay, exc_info=not isinstance(error, ApiError))
                self._stop.wait(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)


def _mapping(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``parent[key]``, {} when absent; TypeError when it is there but no object."""
    value = parent.get(key) or {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{key} is not an object")
    return value


def _slim_metadata(obj: Mapping[str, Any], *extra: str) -> dict[str, Any]:
    meta = _mapping(obj, "metadata")
    return {k: meta[k] for k in ("name", "namespace", "uid", "deletionTimestamp", *extra)
            if k in meta}


def slim_pod_group(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What admission and the controller ask of a PodGroup: its name, uid, deletion, owners
    (the quantum split drops the job controller's) and spec (the gang's minCount)."""
    return {"metadata": _slim_metadata(obj, "ownerReferences"),
            "spec": dict(_mapping(obj, "spec"))}


def slim_nothing(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Nothing of an unscheduled grouped pod: only the controller's listener reads it, whole,
    as it arrives."""
    _mapping(obj, "metadata")
    return {}


def slim_job(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What admission and the controller ask of a Job: its name, uid, deletion, owners, its
    pods' group label, its size (parallelism, completions: a PodGroup's minCount) and the
    topology it states (its own and its template's annotations that say one)."""
    spec = _mapping(obj, "spec")
    template = _mapping(spec, "template")
    labels = _mapping(_mapping(template, "metadata"), "labels")
    group = {names.GROUP_LABEL: labels[names.GROUP_LABEL]} if names.GROUP_LABEL in labels else {}
    slim_spec: dict[str, Any] = {key: spec[key] for key in ("parallelism", "completions")
                                 if key in spec}
    slim_spec["template"] = {"metadata": {"labels": group,
                                          **_topology_annotations(template)}}
    return {"metadata": {**_slim_metadata(obj, "ownerReferences"), **_topology_annotations(obj)},
            "spec": slim_spec}


def _topology_annotations(obj: Mapping[str, Any]) -> dict[str, Any]:
    stated = stated_annotations(obj)
    return {"annotations": stated} if stated else {}


@dataclass
class Watched:
    """The informers one webhook process keeps (none in ``fluence sim`` and unit tests:
    then every lookup reads, as :class:`Informer` does while unsynced).

    ``pod_groups``: every PodGroup (any may hold a group's name). ``jobs``: the Jobs that
    carry Fluence's group label on themselves, which the ``job-group`` handler adds to
    a Job it names a group for, so the Job's PodGroup write finds the stored Job's uid
    here.
    """

    pod_groups: Informer[dict[str, Any]] | None = None
    jobs: Informer[dict[str, Any]] | None = None
    pods: Informer[dict[str, Any]] | None = None
    """The unscheduled grouped pods, kept as nothing: the controller makes their PodGroups."""

    def informers(self) -> list[Informer[dict[str, Any]]]:
        return [i for i in (self.pod_groups, self.jobs, self.pods) if i is not None]

    def pod_group(self, cluster: ClusterAPI, namespace: str, name: str) -> dict[str, Any] | None:
        """PodGroup ``name`` (slim when watched), None when it does not exist."""
        return _get(self.pod_groups, cluster, PODGROUPS, namespace, name, read_if_unseen=False)

    def job(self, cluster: ClusterAPI, namespace: str, name: str, *,
            read_if_unseen: bool = True) -> dict[str, Any] | None:
        """Job ``name`` (slim when watched), None when it does not exist. A Job the synced
        informer has not seen is read, unless ``read_if_unseen`` is False (a labelled Job the
        watch will deliver in a moment): then None."""
        return _get(self.jobs, cluster, JOBS, namespace, name, read_if_unseen=read_if_unseen)


def _get(informer: Informer[dict[str, Any]] | None, cluster: ClusterAPI, resource: Resource,
         namespace: str, name: str, *, read_if_unseen: bool) -> dict[str, Any] | None:
    """The informer's copy; a read when it is absent or unsynced, or has not seen the
    object and ``read_if_unseen``."""
    if informer is not None:
        known, found = informer.lookup(namespace, name)
        if known and (found is not None or not read_if_unseen):
            return found
    return cluster.get(resource, name, namespace)


def watched_for(cluster: ClusterAPI, namespace: str | None = None) -> Watched:
    """The webhook's informers over ``cluster`` (not started: the server starts them), of
    every namespace or only ``namespace``."""
    return Watched(pod_groups=Informer(cluster, PODGROUPS, slim_pod_group, namespace=namespace),
                   jobs=Informer(cluster, JOBS, slim_job, label_selector=names.GROUP_LABEL,
                                 namespace=namespace),
                   pods=Informer(cluster, PODS, slim_nothing, label_selector=names.GROUP_LABEL,
                                 field_selector=UNSCHEDULED, namespace=namespace))
