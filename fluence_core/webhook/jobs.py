"""Built-in handler ``job-group``: a grouped Job's pods join Fluence's PodGroup from the start.

Under Kubernetes 1.36's ``WorkloadWithJob`` gate the job controller makes a
Workload and a PodGroup of N for an Indexed Job with parallelism = completions
> 1, unless the Job's pod template already names a scheduling group. A Job whose
template carries the group label ``fluence.flux-framework.org/group`` gets
``spec.template.spec.schedulingGroup.podGroupName: <group>`` here, so the
controller creates nothing, and the pod handlers (``gang``, ``quantum``) point
at Fluence's own PodGroups; a shared quantum group's scout is then re-pointed
at ``<group>-scout``. Without this handler (a Job admitted before the webhook
ran), the quantum split still deletes the controller's PodGroup, but the
controller makes it again.

The PodGroups the Job's pods will point at are made here too, after the answer
(the background writer, as for pods; never on a dry run), with the minCount the
pods would give them: the template's ``group-size``, else the Job's parallelism,
else its completions. A Job has one admission, its gang has N pods: made here,
the PodGroup costs the pods nothing (issue 20): a pod its Job controls that
points at its own group is not even sent to the webhook
(:attr:`~fluence_core.webhook.gang.GangHandler.match_condition`), and a PodGroup
lost afterwards is made again by the repair (:mod:`.repair`). A Job whose
template the pods' handlers would refuse (a bad group label or ``group-size``, a
Job over Fluence's group limit) gets no PodGroup here, nor its group named on
the template: its pods reach the webhook and are refused with the reason, as
before. A shared quantum Job that is not Indexed gets no PodGroup either (the
quantum split refuses its pods).
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.settings import Settings
from fluence_core.webhook import pods
from fluence_core.webhook._patch import JsonPatch, pointer
from fluence_core.webhook.base import AdmissionContext, AdmissionDenied, Handler

JOBS = "batch/jobs"


def _template(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (job.get("spec") or {}).get("template") or {}


def _group(job: Mapping[str, Any]) -> str | None:
    labels = (_template(job).get("metadata") or {}).get("labels") or {}
    value = labels.get(names.GROUP_LABEL)
    return str(value) if value else None


class JobGroupHandler(Handler):
    name = "job-group"
    order = 5
    resources = (JOBS,)

    def applies(self, job: Mapping[str, Any]) -> bool:
        spec = _template(job).get("spec") or {}
        group = _group(job)
        return (
            group is not None
            and spec.get("schedulerName") == names.SCHEDULER_NAME
            and (spec.get("schedulingGroup") or {}).get("podGroupName") in (None, "", group)
        )

    def mutate(self, job: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        group = _group(job)
        assert group is not None
        size = _pods_size(job)
        if size is None:
            return []  # left unnamed: its pods reach the gang handler, which refuses them
        _ensure_pod_groups(job, group, size, ctx)
        if (_template(job).get("spec") or {}).get("schedulingGroup"):
            return []  # named already: by the user, or by us on a re-invocation
        return [{"op": "add", "path": pointer("spec", "template", "spec", "schedulingGroup"),
                 "value": {"podGroupName": group}}]


def _pod(job: Mapping[str, Any]) -> dict[str, Any]:
    template = _template(job)
    return {"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}}


def _pods_size(job: Mapping[str, Any]) -> int | None:
    """The gang size the Job's pods will give, None when their handlers would refuse them
    (a bad group label or ``group-size``, a Job over Fluence's group limit).

    Such a Job keeps its template as written: a pod pointing at its own group is
    not sent to the webhook (:attr:`GangHandler.match_condition`), so only an
    unnamed one reaches the handler that refuses it with the reason.
    """
    pod = _pod(job)
    if pods.shape_problem(pod) is not None:
        return None
    try:
        return (pods.positive_int_annotation(pod, names.GROUP_SIZE_ANNOTATION)
                or pods.job_size(job) or 1)
    except AdmissionDenied:
        return None


def _ensure_pod_groups(job: Mapping[str, Any], group: str, size: int,
                       ctx: AdmissionContext) -> None:
    """Defer making the PodGroups the Job's pods will point at, as their handlers would."""
    if ctx.cluster is None:
        return  # nothing to make them with: the pods' handlers say so
    if not pods.is_shared_quantum(_pod(job)):
        pods.ensure_pod_group(ctx, group, pods.pod_group_min_count(group, group, size, None))
        return
    if (job.get("spec") or {}).get("completionMode") != "Indexed":
        return  # the split needs completion indexes: the quantum handler refuses the pods
    for target, role in ((group + names.SCOUT_GROUP_SUFFIX, names.ROLE_SCOUT),
                         (group, names.ROLE_WORKER)):
        pods.ensure_pod_group(ctx, target, pods.pod_group_min_count(target, group, size, role))


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [JobGroupHandler()]
