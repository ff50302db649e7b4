"""Built-in handler ``job-group``: a grouped Job's pods join Fluence's PodGroup from the start.

Under Kubernetes 1.36's ``WorkloadWithJob`` gate the job controller makes a Workload and
a PodGroup of N for an Indexed Job with parallelism = completions > 1, unless the Job's
pod template already names a scheduling group. A Job whose template carries the group
label ``fluence.flux-framework.org/group`` gets
``spec.template.spec.schedulingGroup.podGroupName: <group>`` here, so the controller
creates nothing, and the pod handlers (``gang``, ``quantum``) point at Fluence's own
PodGroups; a shared quantum group's scout is then re-pointed at ``<group>-scout``.
Without this handler (a Job admitted before the webhook ran), the quantum split still
deletes the controller's PodGroup, but the controller makes it again.

The PodGroups the Job's pods will point at are made for the stored Job by the webhook's
controller (:mod:`~fluence_core.webhook.controller.controller`), never by this admission,
since a review proves nothing; the handler puts the group label on the Job itself, which
the controller's Job informer selects by. :class:`JobGroupHandler` says which Jobs get
no group named, and how one gang per group name is kept.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.settings import Settings
from fluence_core.webhook.admission import gangs
from fluence_core.webhook.controller import pod_groups
from fluence_core.kube.patch import JsonPatch, pointer
from fluence_core.webhook.admission.base import AdmissionContext, AdmissionDenied, Handler
from fluence_core.kube.meta import metadata_of

JOBS = "batch/jobs"


class JobGroupHandler(Handler):
    """Names a grouped Job's PodGroup on its template and labels the Job with its group.

    The controller makes the PodGroups with the minCount the pods would give them: the
    template's ``group-size``, else the Job's parallelism, else its completions, owned by
    the Job (its uid is on the stored Job), so Kubernetes' garbage collector deletes them
    with it. A Job refused after this webhook answered is never stored: nothing is made
    for it. A Job whose template the pods' handlers would refuse (a bad group label or
    ``group-size``, a Job over Fluence's group limit) gets no group named on its
    template: its pods reach the webhook and are refused with the reason. A shared
    quantum Job that is not Indexed gets no PodGroup either (the quantum split refuses
    its pods).

    **One gang per group name.** A PodGroup of the group's name that exists already is
    looked up on the Job's admission, in the webhook's PodGroup informer (no call; one
    read while it is not synced, none per pod): one with another minCount refuses the
    Job naming both sizes; one being deleted (its earlier gang ending) refuses it too,
    until it is gone; one of the same size is the Job's.
    """

    name = "job-group"
    order = 5
    resources = (JOBS,)

    def applies(self, job: Mapping[str, Any]) -> bool:
        spec = pod_groups.template_of(job).get("spec") or {}
        group = pod_groups.group_of_job(job)
        return (
            group is not None
            and spec.get("schedulerName") == names.SCHEDULER_NAME
            and (spec.get("schedulingGroup") or {}).get("podGroupName") in (None, "", group)
        )

    def mutate(self, job: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        group = pod_groups.group_of_job(job)
        assert group is not None
        size = pod_groups.pods_size(job)
        if size is None:
            return []  # left unnamed: its pods reach the gang handler, which refuses them
        named = bool((pod_groups.template_of(job).get("spec") or {}).get("schedulingGroup"))
        for target, count in pod_groups.pod_groups_of(job, group, size):
            _check_existing(ctx, target, count)
        if named:  # named already: by the user, or by us on a re-invocation
            return _labelled(job, group)
        return [{"op": "add", "path": pointer("spec", "template", "spec", "schedulingGroup"),
                 "value": {"podGroupName": group}}, *_labelled(job, group)]


def _labelled(job: Mapping[str, Any], group: str) -> JsonPatch:
    """The group label on the Job itself, unless it has one: the webhook's controller
    watches Jobs by it and makes their PodGroups from the stored Job
    (:mod:`~fluence_core.webhook.controller.controller`),
    and ``kubectl get jobs -l`` finds a group's Jobs."""
    labels = metadata_of(job).get("labels")
    if isinstance(labels, Mapping) and names.GROUP_LABEL in labels:
        return []
    if not isinstance(labels, Mapping):
        return [{"op": "add", "path": pointer("metadata", "labels"),
                 "value": {names.GROUP_LABEL: group}}]
    return [{"op": "add", "path": pointer("metadata", "labels", names.GROUP_LABEL),
             "value": group}]


def _check_existing(ctx: AdmissionContext, target: str, count: int) -> None:
    """Refuse the Job when PodGroup ``target`` exists with another minCount than ``count``,
    or is being deleted. Asks the PodGroup informer (one read while it is not synced);
    remembers nothing: a review is no fact."""
    gangs.check_known_size(ctx, target, count)
    if ctx.cluster is None:
        return
    existing = ctx.watched.pod_group(ctx.cluster, ctx.namespace, target)
    if existing is None:
        return
    has = pod_groups.min_count_of(existing)
    if metadata_of(existing).get("deletionTimestamp"):
        raise AdmissionDenied(
            f"PodGroup {ctx.namespace}/{target} (minCount {has}) is being deleted: its earlier"
            f" gang is ending. Create this Job again once it is gone, or choose another group"
            f" name")
    if has is not None and has != count:
        raise AdmissionDenied(pod_groups.size_conflict(ctx.namespace, target, has, count))


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [JobGroupHandler()]
