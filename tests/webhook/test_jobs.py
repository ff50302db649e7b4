"""The ``job-group`` handler: a grouped Job names its group on the pod template."""

from __future__ import annotations

import copy
import json

import jsonpatch

from fluence_core import names
from fluence_core.cluster_api import PODGROUPS
from fluence_core.webhook.gang import GangHandler
from fluence_core.webhook.jobs import JobGroupHandler
from fluence_core.webhook.review import AdmissionService
from tests.webhook.webhook_helpers import admit, decode_patch, pod, review


def job(
    group: str | None = "train", scheduler: str = names.SCHEDULER_NAME, **template_spec: object
) -> dict:
    labels = {names.GROUP_LABEL: group} if group else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": 4,
            "completions": 4,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"schedulerName": scheduler, "containers": [], **template_spec},
            },
        },
    }


def _review_job(service: AdmissionService, obj: dict) -> tuple[dict, dict]:
    body = review(obj)
    body["request"]["resource"] = {"group": "batch", "version": "v1", "resource": "jobs"}
    response = service.review(json.dumps(body).encode()).response
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), decode_patch(response))
    return response, patched


def test_a_grouped_job_names_its_group_so_the_job_controller_makes_no_pod_group(settings) -> None:
    response, patched = _review_job(AdmissionService(settings, [JobGroupHandler()]), job())
    assert response["allowed"] is True
    assert patched["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "train"}


def test_jobs_without_the_label_or_for_other_schedulers_are_left_alone(settings) -> None:
    service = AdmissionService(settings, [JobGroupHandler()])
    for obj in (job(group=None), job(scheduler="default-scheduler"),
                job(schedulingGroup={"podGroupName": "theirs"})):
        response, patched = _review_job(service, obj)
        assert response["allowed"] is True and patched == obj


def test_a_pod_already_pointing_at_its_group_gets_the_pod_group_created(settings, cluster) -> None:
    service = AdmissionService(settings, [GangHandler()], cluster=cluster)
    member = pod("train-0", group="train", annotations={names.GROUP_SIZE_ANNOTATION: "4"},
                 schedulingGroup={"podGroupName": "train"})
    response, out = admit(service, member)
    assert response["allowed"] is True and out == member
    created = cluster.get(PODGROUPS, "train", "default")
    assert created["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}


def test_a_pod_in_the_job_controllers_group_keeps_it_and_creates_nothing(settings, cluster) -> None:
    service = AdmissionService(settings, [GangHandler()], cluster=cluster)
    member = pod("train-0", group="train", schedulingGroup={"podGroupName": "controller-made"})
    response, out = admit(service, member)
    assert response["allowed"] is True and out == member
    assert cluster.get(PODGROUPS, "train", "default") is None
