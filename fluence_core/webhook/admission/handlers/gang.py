"""Built-in handler ``gang``: point a grouped pod at its PodGroup, creating it if missing.

A pod labelled ``fluence.flux-framework.org/group: <name>`` gets
``spec.schedulingGroup.podGroupName: <name>``; the PodGroup is created with
``minCount`` from ``group-size``, else the owning Job's parallelism/completions,
else 1, labelled as Fluence's. A pod that already has a scheduling group (the
job controller's, under ``WorkloadWithJob``) keeps it; one already pointing at
the group's own name (the ``job-group`` handler set it on the Job) gets the
PodGroup created, unless it exists or is being made (the ``job-group`` handler
made it with the Job): then the pod costs no API call at all, not even a read
of its Job. A pod a Job controls gives the PodGroup it makes that Job as owner
(the garbage collector deletes it with the Job); a pod whose ``group-size`` disagrees
with the minCount this webhook knows its PodGroup has is refused, naming both.
Shared-coordination quantum groups belong to the ``quantum`` handler.

The pods it must see (:attr:`GangHandler.match_condition`): grouped pods naming
no scheduling group, and those naming their own group unless their Job controls
them with a valid ``group-size`` (or none): the ``job-group`` handler made their
PodGroup with the Job, named the group only on a Job whose pods it would not
refuse, and the repair (:mod:`~fluence_core.webhook.controller.repair`) makes a PodGroup
that was lost. A pod
naming another group is left as it is, so it needs nothing either.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from fluence_core import hookimpl, names
from fluence_core.limits import MAX_GROUP_SIZE
from fluence_core.settings import Settings
from fluence_core.webhook import cel
from fluence_core.webhook.admission import gangs
from fluence_core.webhook import pod_fields
from fluence_core.webhook.controller import pod_groups
from fluence_core.kube.patch import JsonPatch, pointer
from fluence_core.kube.meta import job_controller_reference
from fluence_core.webhook.admission.base import AdmissionContext, Handler


def _match_condition() -> str:
    group, current = cel.label(names.GROUP_LABEL), cel.scheduling_group()
    size = cel.annotation(names.GROUP_SIZE_ANNOTATION)
    bad_size = cel.all_of(cel.has_annotation(names.GROUP_SIZE_ANNOTATION),
                          f"!{cel.positive_int(size, MAX_GROUP_SIZE)}")
    made_with_its_job = cel.all_of(cel.controlled_by("Job"), f"!{bad_size}")
    return cel.all_of(f"{group} != ''", cel.any_of(
        f"{current} == ''", cel.all_of(f"{current} == {group}", f"!{made_with_its_job}")))


class GangHandler(Handler):
    name = "gang"
    order = 20
    match_condition = _match_condition()

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return pod_fields.group_of(pod) is not None and not pod_fields.is_shared_quantum(pod)

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        group = pod_fields.group_of(pod)
        assert group is not None
        current = pod_fields.scheduling_group(pod)
        if current is not None and current != group:
            return []  # the job controller's group: kept as it is
        known = gangs.known_group_size(pod)
        if known is not None:  # checked against the size this webhook knows the PodGroup has
            min_count: int | Callable[[], int] = pod_groups.pod_group_min_count(group, group, known,
                                                                          None)
        elif current == group and job_controller_reference(pod) is not None:
            return []  # as its match_condition: its Job's admission checked the size; no read
        else:  # a Job read only if the PodGroup is unknown
            size = gangs.group_size_later(pod, ctx)
            min_count = lambda: pod_groups.pod_group_min_count(group, group, size(), None)  # noqa: E731
        gangs.check_pod_group(ctx, group, min_count)
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
