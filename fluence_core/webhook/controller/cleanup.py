"""PodGroups Fluence made for gangs of bare pods, deleted once their gang is gone.

A PodGroup made for a Job is owned by the Job
(:mod:`~fluence_core.webhook.admission.handlers.job_group`, :func:`.pod_groups.job_owner`):
Kubernetes' garbage collector deletes it with the Job. A gang of bare pods has no
such owner: each pod's uid exists only once it is stored, and a PodGroup owned by
all of its pods would cost a patch per pod. So every ``webhook_podgroup_cleanup``
seconds the webhook lists the PodGroups it made (label ``managed-by: fluence``) and
deletes each one that

* no owner reference names (what has an owner is the garbage collector's),
* is older than ``webhook_podgroup_grace`` seconds (its gang's pods may still be on
  their way: a Job's pods come after the Job, a gang's siblings a moment apart),
* is not being deleted already, nor being made or made seconds ago by this webhook,
* and no live pod points at (``spec.schedulingGroup.podGroupName``): every grouped pod
  (label ``fluence.flux-framework.org/group``) that pointed at it has finished
  (Succeeded, Failed), is being deleted, or is gone.

Cost: one PodGroup list per interval, and a grouped-pod list only when some PodGroup
is a candidate. A PodGroup still kept by Kubernetes' protection finalizer (a pod not
yet finished points at it) stays until that pod ends. A gang re-using the name just
as its stale PodGroup is deleted finds it gone or terminating: its pods wait, and the
repair (:mod:`.repair`) makes the PodGroup again once it is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fluence_core import names
from fluence_core.kube.api import PODGROUPS, PODS, ClusterAPI
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.kube.api import TERMINAL_PHASES
from fluence_core.kube.meta import metadata_of
from fluence_core.webhook import pod_fields
from fluence_core.periodic import Periodic

if TYPE_CHECKING:  # the service is handed in by the process; the controller imports no admission
    from fluence_core.webhook.admission.review import AdmissionService

MANAGED: str = f"{names.MANAGED_BY_LABEL}={names.SCHEDULER_NAME}"
"""The label selector of the PodGroups Fluence made."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def age(obj: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds since ``obj`` was created; None when it has no readable creationTimestamp."""
    stamp = metadata_of(obj).get("creationTimestamp")
    try:
        created = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (now - created).total_seconds()


def live(pod: Mapping[str, Any]) -> bool:
    """Not finished and not being deleted."""
    return not metadata_of(pod).get("deletionTimestamp") and (
        (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES)


class PodGroupCleanup(Periodic):
    """The periodic cleanup (module docstring); :meth:`sweep` is one pass. ``busy(key)``
    says whether this webhook is making PodGroup ``key`` now or made it seconds ago."""

    thread_name = "webhook-podgroup-cleanup"
    failure = "webhook: cleaning up PodGroups failed"

    def __init__(self, cluster: ClusterAPI, interval: float, grace: float, *,
                 busy: Callable[[Hashable], bool] = lambda key: False,
                 now: Callable[[], datetime] = _utcnow) -> None:
        super().__init__(interval)
        self.cluster = cluster
        self.grace = grace
        self.busy = busy
        self.now = now
        self.deleted = 0
        """PodGroups this cleanup deleted, over its life."""

    def candidates(self) -> list[tuple[str, str]]:
        """``(namespace, name)`` of the PodGroups that are unowned, old enough, not being
        deleted nor made by this webhook."""
        now = self.now()
        found = []
        for group in self.cluster.list(PODGROUPS, label_selector=MANAGED).items:
            meta = metadata_of(group)
            key = (str(meta.get("namespace")), str(meta.get("name")))
            old = age(group, now)
            if (meta.get("ownerReferences") or meta.get("deletionTimestamp") or old is None
                    or old < self.grace or self.busy((PODGROUPS.plural, *key))):
                continue
            found.append(key)
        return found

    def sweep(self) -> list[tuple[str, str]]:
        """One pass: ``(namespace, name)`` of every PodGroup it deleted."""
        candidates = self.candidates()
        if not candidates:
            return []
        used = set()
        for pod in self.cluster.list(PODS, label_selector=names.GROUP_LABEL).items:
            target = pod_fields.scheduling_group(pod)
            if target is not None and live(pod):
                used.add((str(metadata_of(pod).get("namespace")), target))
        deleted = []
        for namespace, name in candidates:
            if (namespace, name) in used:
                continue
            try:
                if self.cluster.delete(PODGROUPS, name, namespace):
                    deleted.append((namespace, name))
                    logger.info("webhook: deleted PodGroup %s/%s: no Job owns it and no live"
                                " pod points at it any more", namespace, name)
            except ApiError as error:  # the next pass tries again
                logger.warning("webhook: cannot delete PodGroup %s/%s: %s", namespace, name,
                               error)
        self.deleted += len(deleted)
        return deleted

    def tick(self) -> object:
        return self.sweep()


def cleanup_for(service: AdmissionService) -> PodGroupCleanup | None:
    """The cleanup ``fluence webhook`` runs beside its server (one of its loops); None when the
    service has no cluster or ``webhook_podgroup_cleanup`` is 0."""
    settings = service.settings
    if service.cluster is None or settings.webhook.podgroup_cleanup <= 0:
        return None
    writer = service.writer
    recent = service.controller.recent

    def busy(key: Hashable) -> bool:
        return (writer is not None and writer.holds(key)) or bool(recent.lookup(key)[0])

    return PodGroupCleanup(service.cluster, settings.webhook.podgroup_cleanup,
                           settings.webhook.podgroup_grace, busy=busy)
