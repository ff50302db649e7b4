"""Built-in handler ``job-group``: a grouped Job's pods join Fluence's PodGroup from the start.

Under Kubernetes 1.36's ``WorkloadWithJob`` gate the job controller makes a
Workload and a PodGroup of N for an Indexed Job with parallelism = completions
> 1, unless the Job's pod template already names a scheduling group. A Job whose
template carries the group label ``fluence.flux-framework.org/group`` gets
``spec.template.spec.schedulingGroup.podGroupName: <group>`` here, so the
controller creates nothing, and the pod handlers (``gang``, ``quantum``) create
and point at Fluence's own PodGroups; a shared quantum group's scout is then
re-pointed at ``<group>-scout``. Without this handler (a Job admitted before
the webhook ran), the quantum split still deletes the controller's PodGroup,
but the controller makes it again.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.settings import Settings
from fluence_core.webhook._patch import JsonPatch, pointer
from fluence_core.webhook.base import AdmissionContext, Handler

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
        return (
            _group(job) is not None
            and spec.get("schedulerName") == names.SCHEDULER_NAME
            and not (spec.get("schedulingGroup") or {}).get("podGroupName")
        )

    def mutate(self, job: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        group = _group(job)
        assert group is not None
        return [{"op": "add", "path": pointer("spec", "template", "spec", "schedulingGroup"),
                 "value": {"podGroupName": group}}]


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [JobGroupHandler()]
