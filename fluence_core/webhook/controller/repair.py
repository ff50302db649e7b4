"""PodGroups lost with a killed webhook's queue, found on the pods and made again.

The webhook makes a group's PodGroup after it answers (:mod:`.writer`). A
process killed with PodGroups still queued loses them, and the pods it
admitted wait for good: the scheduler leaves a gang whose PodGroup is missing
waiting ("PodGroup ... does not exist yet") until the PodGroup's watch event
arrives. So at start, and every ``webhook_repair_interval`` seconds after, the
webhook looks at the pods it stamped that are still unscheduled, and gives
every PodGroup they point at but that does not exist to the same writer,
built by the step the controller takes for a stored pod (:mod:`.controller`,
minCount from the pod's ``group-size`` or Job and :func:`.pod_groups.pod_group_min_count`):
a safety net behind the controller's pod informer.

What stays true:

* cost: one pod list per interval (the group label, ``spec.nodeName=``); only
  when it finds a grouped pod pointing at one of Fluence's PodGroups, one
  PodGroup list too. No writes while nothing is missing;
* idempotent: a PodGroup the admission path is writing now (the writer holds
  its key) or made seconds ago is left to it, and the create's "already
  exists" counts as made;
* dry run: its pods are never stored, so no list finds them;
* only Fluence's: a pod pointing at another PodGroup (the job controller's)
  keeps it, as admission leaves it; terminating and finished pods are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fluence_core import names
from fluence_core.kube.api import PODGROUPS, PODS, ClusterAPI
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.kube.meta import metadata_of
from fluence_core.webhook import pod_fields
from fluence_core.periodic import Periodic
from fluence_core.webhook.controller.controller import waiting_for, wanted_for_pod
from fluence_core.webhook.controller.informer import UNSCHEDULED
from fluence_core.webhook.controller.writer import BackgroundWriter

if TYPE_CHECKING:  # the service is handed in by the process; the controller imports no admission
    from fluence_core.webhook.admission.review import AdmissionService



class PodGroupRepair(Periodic):
    """Finds PodGroups that unscheduled stamped pods point at but that do not exist, and has
    ``writer`` make them. :meth:`run_once` is one pass; :meth:`start` runs one at once, then
    one every ``interval`` seconds, on a thread, until :meth:`stop`.
    """

    thread_name = "webhook-repair"
    failure = "webhook: looking for missing PodGroups failed"

    def __init__(self, service: AdmissionService, writer: BackgroundWriter,
                 cluster: ClusterAPI, interval: float) -> None:
        super().__init__(interval, at_start=True)
        self.service = service
        self.writer = writer
        self.cluster = cluster
        self.repaired = 0
        """PodGroups handed to the writer by this repair, over its life."""

    def run_once(self) -> list[tuple[str, str]]:
        """One pass: ``(namespace, PodGroup)`` of every PodGroup given to the writer."""
        listed = self.cluster.list(PODS, label_selector=names.GROUP_LABEL,
                                   field_selector=UNSCHEDULED)
        waiting: dict[tuple[str, str], tuple[str, list[Mapping[str, Any]]]] = {}
        for pod in listed.items:
            found = waiting_for(pod)
            if found is not None:
                namespace, target, group = found
                waiting.setdefault((namespace, target), (group, []))[1].append(pod)
        if not waiting:
            return []
        existing = {(str(g["metadata"].get("namespace")), str(g["metadata"].get("name")))
                    for g in self.cluster.list(PODGROUPS).items}
        made = []
        for (namespace, target), (group, members) in sorted(waiting.items()):
            if (namespace, target) in existing:
                continue
            if self._repair(namespace, target, group, members):
                made.append((namespace, target))
        self.repaired += len(made)
        return made

    def _repair(self, namespace: str, target: str, group: str,
                members: list[Mapping[str, Any]]) -> bool:
        controller = self.service.controller
        if controller.exists(namespace, target):
            return False  # being made now, or made seconds ago
        first = min(members, key=lambda p: str(metadata_of(p).get("name")))
        wanted = wanted_for_pod(first, controller._job_size)
        if wanted is None:
            return False
        try:
            count = wanted.min_count() if callable(wanted.min_count) else wanted.min_count
        except (FluenceError, ApiError) as error:
            logger.error("webhook: PodGroup %s/%s is missing, but pod %s cannot say its size:"
                         " %s", namespace, target, pod_fields.pod_label(first), error)
            return False
        logger.warning("webhook: PodGroup %s/%s of group %s in namespace %s is missing while %d"
                       " unscheduled pod(s) wait for it (a queued write lost?); making it"
                       " (minCount %d)", namespace, target, group, namespace, len(members),
                       count)
        controller.ensure(replace(wanted, min_count=count))
        return True

    def tick(self) -> object:
        return self.run_once()


def repair_for(service: AdmissionService) -> PodGroupRepair | None:
    """The repair ``fluence webhook`` runs beside its server (one of its loops, started with
    it); None when the service has no cluster or writer, or ``webhook_repair_interval`` is 0."""
    interval = service.settings.webhook.repair_interval
    if service.cluster is None or service.writer is None or interval <= 0:
        return None
    return PodGroupRepair(service, service.writer, service.cluster, interval)
