"""Built-in handler ``gang``: point a grouped pod at its PodGroup, creating it if missing.

A pod labelled ``fluence.flux-framework.org/group: <name>`` gets
``spec.schedulingGroup.podGroupName: <name>``; the PodGroup is created with
``minCount`` from ``group-size``, else the owning Job's parallelism/completions,
else 1, labelled as Fluence's. A pod that already has a scheduling group (the
job controller's, under ``WorkloadWithJob``) keeps it; one already pointing at
the group's own name (the ``job-group`` handler set it on the Job) gets the
PodGroup created, unless it exists or is being made (the ``job-group`` handler
made it with the Job): then the pod costs no API call at all, not even a read
of its Job. Shared-coordination quantum groups belong to the ``quantum`` handler.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl
from fluence_core.settings import Settings
from fluence_core.webhook import pods
from fluence_core.webhook._patch import JsonPatch, pointer
from fluence_core.webhook.base import AdmissionContext, Handler


class GangHandler(Handler):
    name = "gang"
    order = 20

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return pods.group_of(pod) is not None and not pods.is_shared_quantum(pod)

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        group = pods.group_of(pod)
        assert group is not None
        current = pods.scheduling_group(pod)
        if current is not None and current != group:
            return []  # the job controller's group: kept as it is
        size = pods.group_size_later(pod, ctx)  # a Job read only if the PodGroup is unknown
        pods.ensure_pod_group(
            ctx, group, lambda: pods.pod_group_min_count(group, group, size(), None))
        if current == group:
            return []  # set by the job-group handler on the Job, or ours on a re-invocation
        return [
            {
                "op": "add",
                "path": pointer("spec", "schedulingGroup"),
                "value": {"podGroupName": group},
            }
        ]


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [GangHandler()]
