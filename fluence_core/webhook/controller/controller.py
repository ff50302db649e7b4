"""The webhook's controller: what admitted objects need, made from the stored objects alone.

An AdmissionReview proves nothing about the cluster: anyone who can reach the webhook's
port can POST one, and a webhook that acted on it with its own rights would make
PodGroups, ConfigMaps or Secrets wherever a forged review said. So admission only
answers (a patch or a refusal, :mod:`~fluence_core.webhook.admission.review`), and
everything that writes to the cluster is done here, from objects the API server stored,
found through the webhook's informers (:mod:`.informer`), as Kubernetes' own controllers
do. :class:`Controller` lists what it makes.

The webhook configuration is then ``sideEffects: None``: a dry run and a forged review
change nothing. The writes go through the webhook's background writer (:mod:`.writer`:
one write per object at a time, retried), or on the caller's thread without one
(``fluence sim``, unit tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from fluence_core import names
from fluence_core.kube.api import JOBS, PODGROUPS, RESOURCES, ClusterAPI, Resource
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import ApiError, Conflict, NotFound
from fluence_core.log import logger
from fluence_core.settings import Settings
from fluence_core.kube.meta import metadata_of
from fluence_core.webhook import pod_fields
from fluence_core.webhook.controller import pod_groups
from fluence_core.webhook.controller.informer import Informer, Watched, slim_nothing, watched_for
from fluence_core.webhook.controller.recent import Recent
from fluence_core.webhook.controller.workload_topology import stated_for_job, with_topology
from fluence_core.webhook.controller.writer import NOT_YET_MAX, BackgroundWriter, NotYet, Write

SYNC_WAIT = 10.0
"""Seconds a write waits for the PodGroup informer's first list before it creates anyway
(the create's "already exists" is then the answer: one call per object at start)."""
JOB_WAIT = 2.0
"""Seconds a Job's pod whose Job the synced Job informer has not delivered yet waits for it
before its PodGroup is made from a read of the Job. The pods' and the Jobs' watches are
two streams: under load a pod's event now and then comes first (4 in 100 creates in
``bench_webhook.py --pods job``), and its Job's follows milliseconds later. Waiting makes
that PodGroup from the Job's own event, with no read; a Job that never comes (one admitted
before the webhook ran carries no group label, so the informer never sees it) is read
once this has passed."""
FINISHED = ("Complete", "Failed")
"""A Job condition type that, true, says the Job will make no more pods."""


@dataclass
class StoredContext:
    """What a :class:`Reconciler` acting on a stored object has: the webhook's cluster
    client, settings, informers, and :meth:`make` for its writes."""

    cluster: ClusterAPI
    settings: Settings
    watched: Watched
    recent: Recent
    make: Callable[[Hashable, str, Callable[[], None]], None]
    """``make(key, description, action)``: have ``action`` (idempotent) write the object
    named ``key``; once per key at a time, retried, failures logged."""


@runtime_checkable
class Reconciler(Protocol):
    """A plugin's part of the controller: a handler that makes objects for what it admitted
    does so here, from the stored object (never from the admission request).

    ``resources`` names the kinds (as a handler's), ``stored_selector`` the label
    selector of the stored objects it is called with (its handler puts that label on
    what it admits); ``reconcile`` gets each such object the informer lists, sees added
    or modified, whole, and must be idempotent.
    """

    resources: tuple[str, ...]
    stored_selector: str

    def reconcile(self, obj: Mapping[str, Any], ctx: StoredContext) -> None: ...


@dataclass(frozen=True)
class Wanted:
    """A PodGroup a stored object needs."""

    namespace: str
    name: str
    min_count: int | Callable[[], int]
    """A number, or how to learn it (it may read the pod's Job: only once it is missing)."""
    owner: Mapping[str, str] | None
    source: str
    """The stored object it is made for, for the log."""
    topology: Callable[[ClusterAPI], Mapping[str, str]] | None = None
    """The topology its workload states (:mod:`.workload_topology`), read only once the
    PodGroup is found missing (it may read the Job's JobSet and TrainJob)."""


def job_finished(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") in FINISHED and c.get("status") == "True"
               for c in conditions)


def wanted_for_job(job: Mapping[str, Any]) -> list[Wanted]:
    """The PodGroups a stored grouped Job's pods will point at (``job-group`` handler): none
    for a Job being deleted or finished, one whose template names no own group, or whose
    pods the handlers would refuse."""
    meta = metadata_of(job)
    namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    group = pod_groups.group_of_job(job)
    template_spec = (pod_groups.template_of(job).get("spec") or {})
    if (not namespace or not name or not uid or group is None or meta.get("deletionTimestamp")
            or job_finished(job) or template_spec.get("schedulerName") != names.SCHEDULER_NAME
            or pod_fields.scheduling_group({"spec": template_spec}) != group):
        return []
    size = pod_groups.pods_size(job)
    if size is None:
        return []
    owner = {"apiVersion": JOBS.api_version, "kind": JOBS.kind, "name": str(name),
             "uid": str(uid)}
    source = f"Job {namespace}/{name}"
    def topology(cluster: ClusterAPI) -> Mapping[str, str]:
        return stated_for_job(cluster, job)

    return [Wanted(str(namespace), target, count, owner, source, topology)
            for target, count in pod_groups.pod_groups_of(job, group, size)]


def waiting_for(pod: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(namespace, PodGroup, group)`` a stored pod waits for, if the webhook stamped it with
    one of Fluence's PodGroups and it may still be scheduled; None otherwise."""
    group = pod_fields.group_of(pod)
    target = pod_fields.scheduling_group(pod)
    meta = metadata_of(pod)
    namespace = meta.get("namespace")
    if (group is None or target is None or not namespace or not pod_fields.is_fluence_pod(pod)
            or meta.get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
        return None
    if target not in (group, group + names.SCOUT_GROUP_SUFFIX):
        return None  # the job controller's PodGroup: admission keeps it and makes none
    return str(namespace), target, group


def wanted_for_pod(pod: Mapping[str, Any], job_size: Callable[[str, str], int | None],
                   job_of: Callable[[str, str], Mapping[str, Any] | None] | None = None
                   ) -> Wanted | None:
    """The PodGroup a stored unscheduled grouped pod points at (one of Fluence's), its
    minCount learnt only when asked (``job_size(namespace, job)`` reads the controlling
    Job's), and the topology its controlling Job (``job_of``) and that Job's owners state."""
    found = waiting_for(pod)
    if found is None:
        return None
    namespace, target, group = found
    owner = pod_groups.job_owner(pod)
    role = pod_fields.role(pod) if pod_fields.is_shared_quantum(pod) else None

    def min_count() -> int:
        size = pod_groups.positive_int_annotation(pod, names.GROUP_SIZE_ANNOTATION)
        if size is None and owner is not None:
            size = job_size(namespace, owner["name"])
        return pod_groups.pod_group_min_count(target, group, size or 1, role)

    def topology(cluster: ClusterAPI) -> Mapping[str, str]:
        job = job_of(namespace, owner["name"]) if owner is not None and job_of else None
        return stated_for_job(cluster, job) if job is not None else {}

    return Wanted(namespace, target, min_count, owner, f"pod {pod_fields.pod_label(pod)}", topology)


class Controller:
    """Makes what stored objects need. The informer listeners :meth:`job_stored` and
    :meth:`pod_stored` are also what ``fluence sim`` and tests call for an object they stored.

    * a grouped Job (its template names its group as scheduling group, ``job-group``
      handler) gets its PodGroups, owned by the Job: the stored Job carries the uid
      the owner reference needs, so nothing waits for it;
    * an unscheduled grouped pod pointing at one of Fluence's PodGroups that does not
      exist gets it (a bare gang's, a Job's whose Job missed the ``job-group``
      handler), minCount from the pod's ``group-size``, else its controlling Job's
      parallelism, owned by that Job when one controls the pod; a pod whose Job the
      Job informer has not delivered yet waits for it (:data:`JOB_WAIT`), so that the
      Job's own event makes the PodGroup and nothing reads the Job;
    * the PodGroup made for a Job carries the topology the Job, its pod template, its
      JobSet or its TrainJob states (:mod:`.workload_topology`), so a constraint written only
      on the workload is the gang's;
    * a shared quantum group's split pod whose Job also has the job controller's own
      PodGroup (a Job admitted before the webhook ran) has that one deleted: the split
      leaves it empty forever;
    * plugins' objects (:class:`Reconciler`, the Flux handler's ConfigMap, Secret and
      Service) are made by the plugin's ``reconcile`` from the stored workload.
    """

    def __init__(self, settings: Settings, cluster: ClusterAPI | None, watched: Watched,
                 recent: Recent, writer: BackgroundWriter | None,
                 reconcilers: Sequence[Reconciler] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        """When a pod's wait for its Job (:data:`JOB_WAIT`) ends: the writer's clock."""
        self.cluster = cluster
        self.watched = watched
        self.recent = recent
        self.writer = writer
        self.reconcilers = list(reconcilers)
        self._informers: list[Informer[dict[str, Any]]] = []
        self._jobs: Informer[dict[str, Any]] | None = watched.jobs
        """The Job informer this controller listens to (:meth:`informers`)."""
        self.made = 0
        """PodGroups this controller created."""

    # -- wiring ----------------------------------------------------------------------------

    def informers(self, namespace: str | None = None) -> list[Informer[dict[str, Any]]]:
        """The informers to start, listening: the watched ones (their Jobs and pods come here)
        and one per plugin reconciler's kind and selector; the controller's own watch every
        namespace, or only ``namespace`` (a test's webhook, registered for it alone). Call
        once."""
        if self._informers or self.cluster is None:
            return self._informers
        own = watched_for(self.cluster, namespace)  # what the service's informers lack
        jobs = self.watched.jobs if self.watched.jobs is not None else own.jobs
        stored_pods = self.watched.pods if self.watched.pods is not None else own.pods
        assert jobs is not None and stored_pods is not None
        self._jobs = jobs
        jobs.listeners.append(self.job_stored)
        stored_pods.listeners.append(self.pod_stored)
        extra: dict[tuple[str, str], Informer[dict[str, Any]]] = {}
        for reconciler in self.reconcilers:
            for kind in reconciler.resources:
                resource = _resource_of(kind)
                informer = extra.get((kind, reconciler.stored_selector))
                if informer is None:
                    informer = Informer(self.cluster, resource, slim_nothing,
                                        label_selector=reconciler.stored_selector,
                                        namespace=namespace)
                    extra[(kind, reconciler.stored_selector)] = informer
                informer.listeners.append(self._listener(reconciler))
        watched = self.watched.informers()
        self._informers = [*watched, *(i for i in (jobs, stored_pods)
                                       if all(i is not w for w in watched)), *extra.values()]
        return self._informers

    def _listener(self, reconciler: Reconciler) -> Callable[[str, Mapping[str, Any]], None]:
        def heard(event: str, obj: Mapping[str, Any]) -> None:
            self.stored(reconciler, obj)
        return heard

    def stored(self, reconciler: Reconciler, obj: Mapping[str, Any]) -> None:
        """Hand a stored object to a plugin's reconciler."""
        if self.cluster is None:
            return
        reconciler.reconcile(obj, StoredContext(self.cluster, self.settings, self.watched,
                                                self.recent, self.make))

    # -- the listeners ---------------------------------------------------------------------

    def job_stored(self, event: str, job: Mapping[str, Any]) -> None:
        """A grouped Job as stored: its PodGroups, owned by it."""
        for wanted in wanted_for_job(job):
            self.ensure(wanted)

    def pod_stored(self, event: str, pod: Mapping[str, Any]) -> None:
        """An unscheduled grouped pod as stored: the PodGroup it points at; for a quantum
        split's pod, the job controller's PodGroup its Job also has goes."""
        wanted = wanted_for_pod(pod, self._job_size, self._job)
        if wanted is None:
            return
        if not self._after_job(wanted):
            self.ensure(wanted)
        if pod_fields.role(pod) is not None and pod_fields.is_shared_quantum(pod):
            self._drop_job_controller_group(pod)

    def _job_unseen(self, namespace: str, owner: Mapping[str, str]) -> bool:
        """Whether the synced Job informer lacks the Job ``owner`` names (by uid: a Job of
        that name being replaced does not count). False while unsynced: a look-up reads
        then anyway, and nothing says the Job is coming."""
        informer = self._jobs
        if informer is None:
            return False
        known, found = informer.lookup(namespace, owner["name"])
        return known and (found is None or metadata_of(found).get("uid") != owner["uid"])

    def _after_job(self, wanted: Wanted) -> bool:
        """Hand a Job's pod's PodGroup to the writer to wait (:data:`JOB_WAIT`, holding no
        thread) for the Job informer to deliver the Job, when it has not yet: the Job's own
        event then makes the PodGroup (:meth:`job_stored`), and the wait ends finding it made;
        a Job still missing at the end is read as before. False when there is nothing to wait
        for, or no writer to wait in: the caller makes it now."""
        owner, namespace = wanted.owner, wanted.namespace
        if (owner is None or self.writer is None or self.cluster is None
                or not self._job_unseen(namespace, owner)):
            return False
        if self.exists(namespace, wanted.name):
            return True
        deadline = self.clock() + JOB_WAIT

        def then_ensure() -> None:
            if self.clock() < deadline and self._job_unseen(namespace, owner):
                raise NotYet(f"the Job informer has not delivered Job {namespace}/{owner['name']}")
            self.ensure(wanted)
        key = ("after-job", namespace, owner["uid"], wanted.name)
        return self.writer.submit(Write(
            key, f"PodGroup {namespace}/{wanted.name} of {wanted.source}, once its Job is seen",
            then_ensure, patience=JOB_WAIT + NOT_YET_MAX))

    # -- PodGroups -------------------------------------------------------------------------

    def exists(self, namespace: str, name: str, *, writing: bool = True) -> bool:
        """Whether PodGroup ``name`` is known to exist or be on its way: made or seen
        seconds ago, being written (``writing``: but by the caller), or in the synced
        informer (being deleted or not)."""
        key = (PODGROUPS.plural, namespace, name)
        if self.recent.lookup(key)[0] or (writing and self.writer is not None
                                          and self.writer.holds(key)):
            return True
        informer = self.watched.pod_groups
        if informer is None:
            return False
        known, found = informer.lookup(namespace, name)
        return known and found is not None

    def ensure(self, wanted: Wanted) -> None:
        """Have PodGroup ``wanted`` made unless it is known to exist."""
        if self.cluster is None or self.exists(wanted.namespace, wanted.name):
            return
        key = (PODGROUPS.plural, wanted.namespace, wanted.name)
        self.make(key, f"PodGroup {wanted.namespace}/{wanted.name} of {wanted.source}",
                  lambda: self._create(wanted))

    def make(self, key: Hashable, description: str, action: Callable[[], None]) -> None:
        """Run ``action`` through the writer (after this returns), else now (logged, never
        raised: a stored object's needs are made again on its next event)."""
        if self.writer is not None and self.writer.submit(Write(key, description, action)):
            return
        try:
            action()
        except (FluenceError, ApiError) as error:
            logger.error("webhook: %s failed: %s", description, error)

    def _create(self, wanted: Wanted) -> None:
        cluster = self.cluster
        assert cluster is not None
        namespace, name = wanted.namespace, wanted.name
        informer = self.watched.pod_groups
        if informer is not None and not informer.synced:
            informer.wait_synced(SYNC_WAIT)
        if self.exists(namespace, name, writing=False):
            return
        try:
            count = wanted.min_count() if callable(wanted.min_count) else wanted.min_count
        except FluenceError as error:  # a bad group-size, a Job over the limit: no retry helps
            logger.error("webhook: PodGroup %s/%s is missing, but %s cannot say its size: %s",
                         namespace, name, wanted.source, error)
            return
        body = pod_groups.pod_group_body(name, namespace, count, wanted.owner)
        if wanted.topology is not None:
            body = with_topology(body, wanted.topology(cluster))
        try:
            cluster.create(PODGROUPS, body, namespace)
            self.made += 1
            logger.info("webhook: created PodGroup %s/%s (minCount %d) for %s", namespace, name,
                        count, wanted.source)
        except Conflict:  # made meanwhile (a sibling's event, an earlier gang)
            existing = self.watched.pod_group(cluster, namespace, name)
            has = None if existing is None else pod_groups.min_count_of(existing)
            if has is not None and has != count:
                logger.error("webhook: %s", pod_groups.size_conflict(namespace, name, has, count))
            count = has if has is not None else count
        self.recent.remember((PODGROUPS.plural, namespace, name))
        self.recent.remember(pod_groups.size_key(namespace, name), count)

    def _job(self, namespace: str, job: str) -> Mapping[str, Any] | None:
        cluster = self.cluster
        assert cluster is not None
        stored: Mapping[str, Any] | None = self.recent.get(
            ("job", namespace, job), lambda: self.watched.job(cluster, namespace, job))
        return stored

    def _job_size(self, namespace: str, job: str) -> int | None:
        stored = self._job(namespace, job)
        return pod_groups.job_size(stored) if stored is not None else None

    def _drop_job_controller_group(self, pod: Mapping[str, Any]) -> None:
        """Delete the PodGroups the split pod's controlling Job controls, but Fluence's own
        (``<group>``, ``<group>-scout``): the job controller's gang of N, left empty by the
        split. Once per Job, for a few seconds."""
        job = pod_fields.controller_of(pod, "Job")
        group = pod_fields.group_of(pod)
        namespace = str(metadata_of(pod).get("namespace") or "")
        if job is None or group is None or self.cluster is None:
            return
        done = ("dropped-job-podgroups", namespace, job[1])
        if self.recent.lookup(done)[0]:
            return
        self.recent.remember(done)
        ours = (group, group + names.SCOUT_GROUP_SUFFIX)
        cluster = self.cluster

        def drop() -> None:
            informer = self.watched.pod_groups
            listed = None if informer is None else informer.values(namespace)
            if listed is None:
                listed = cluster.list(PODGROUPS, namespace).items
            for existing in listed:
                name = str(metadata_of(existing).get("name") or "")
                if name in ours or pod_fields.controller_of(existing, "Job") != job:
                    continue
                try:
                    cluster.delete(PODGROUPS, name, namespace)
                    logger.info("webhook: deleted PodGroup %s/%s replaced by the quantum split",
                                namespace, name)
                except NotFound:
                    pass

        self.make(done, f"drop the job controller's PodGroups of Job {namespace}/{job[0]}", drop)


def _resource_of(kind: str) -> Resource:
    """The Resource a handler's ``"group/plural"`` (or ``"pods"``) names."""
    group, _, plural = kind.rpartition("/")
    for resource in RESOURCES.values():
        if resource.plural == plural and (resource.group or "") == group:
            return resource
    raise FluenceError(f"a reconciler names kind {kind!r}, which Fluence's client does not know")
