"""The ``job-group`` handler: a grouped Job names its group on the pod template and gets the
PodGroups its pods will point at made, so the pods cost no API call (issue 20)."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import jsonpatch

from fluence_core import names
from fluence_core.kube.api import PODGROUPS
from fluence_core.limits import MAX_GROUP_SIZE
from fluence_core.webhook import BackgroundWriter
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.admission.handlers.job_group import JobGroupHandler
from fluence_core.webhook.controller.pod_groups import pod_group_body
from fluence_core.hybrid.split import QuantumSplitHandler
from fluence_core.webhook.admission.review import AdmissionService
from fluence_core.webhook.controller.writer import Write
from tests.webhook.webhook_helpers import Counting, admit, decode_patch, pod, review, shared


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


def _review_job(service: AdmissionService, obj: dict, **kw: Any) -> tuple[dict, dict]:
    body = review(obj, **kw)
    body["request"]["resource"] = {"group": "batch", "version": "v1", "resource": "jobs"}
    response = service.review(json.dumps(body).encode()).response
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), decode_patch(response))
    return response, patched


def _admit_job(settings, cluster, obj: dict, handlers: list | None = None,
               inner: Any = None) -> tuple[dict, dict, BackgroundWriter]:
    """Review ``obj`` with a background writer, store the patched Job as the API server would
    after the answer (in ``inner`` when ``cluster`` counts calls), wait for the writes."""
    writer = BackgroundWriter()
    service = AdmissionService(settings, handlers or [JobGroupHandler()], cluster=cluster,
                               writer=writer)
    response, patched = _review_job(service, obj)
    stored = {}
    if response["allowed"]:
        stored = (inner or cluster).create("jobs", patched, "default")
        service.controller.job_stored("ADDED", stored)  # as from its Job informer
    assert writer.flush(10)
    return response, stored, writer


def test_a_grouped_job_names_its_group_so_the_job_controller_makes_no_pod_group(
        settings, cluster) -> None:
    service = AdmissionService(settings, [JobGroupHandler()], cluster=cluster)
    response, patched = _review_job(service, job())
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


def _min_count(cluster: Any, name: str) -> int | None:
    made = cluster.get(PODGROUPS, name, "default")
    return None if made is None else made["spec"]["schedulingPolicy"]["gang"]["minCount"]


def test_a_grouped_job_gets_its_pod_group_of_parallelism_made(settings, cluster) -> None:
    grouped = job()
    grouped["spec"]["parallelism"] = 3
    response, _, _ = _admit_job(settings, cluster, grouped)
    assert response["allowed"] is True
    assert _min_count(cluster, "train") == 3


def test_a_jobs_pod_group_is_owned_by_the_stored_job(settings, cluster) -> None:
    _, stored, _ = _admit_job(settings, cluster, job())
    made = cluster.get(PODGROUPS, "train", "default")
    assert made["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train",
         "uid": stored["metadata"]["uid"]}]


def test_a_reviewed_job_never_stored_leaves_no_pod_group(settings, cluster) -> None:
    writer = BackgroundWriter()
    service = AdmissionService(settings, [JobGroupHandler()], cluster=cluster, writer=writer)
    response, _ = _review_job(service, job())  # refused by a later webhook: never stored
    assert response["allowed"] is True
    assert writer.flush(10)
    assert cluster.get(PODGROUPS, "train", "default") is None and writer.written == 0


def test_a_stored_job_without_a_writer_gets_its_owned_pod_group_at_once(settings,
                                                                        cluster) -> None:
    service = AdmissionService(settings, [JobGroupHandler()], cluster=cluster)  # fluence sim
    _, patched = _review_job(service, job())
    stored = cluster.create("jobs", patched, "default")
    service.controller.job_stored("ADDED", stored)
    made = cluster.get(PODGROUPS, "train", "default")
    assert made["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert made["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]


def test_the_pods_of_a_stored_job_ask_the_api_server_nothing(settings, cluster) -> None:
    counting = Counting(cluster)
    writer = BackgroundWriter()
    service = AdmissionService(settings, [JobGroupHandler(), GangHandler()], cluster=counting,
                               writer=writer)
    _, patched = _review_job(service, job())
    assert counting.calls == ["get podgroups"]  # admission: is the group's name free?
    stored = cluster.create("jobs", patched, "default")  # by the API server, after the answer
    service.controller.job_stored("ADDED", stored)
    writer.flush(10)
    assert counting.calls[1:] == ["create podgroups"]  # the controller, from the stored Job
    before = list(counting.calls)
    template = stored["spec"]["template"]
    for index in range(4):  # as the job controller makes them, no group-size annotation
        member = pod(f"train-{index}", group="train", job="train", index=index,
                     schedulingGroup=template["spec"]["schedulingGroup"])
        response, out = admit(service, member)
        assert response["allowed"] is True and out == member
    writer.flush(10)
    writer.close()
    assert counting.calls == before  # the pods: no second create, no read of the Job


def test_a_jobs_pod_makes_its_pod_group_owned_by_its_job(settings, cluster) -> None:
    service = AdmissionService(settings, [GangHandler()], cluster=cluster)
    member = pod("train-0", group="train", job="train", index=0,
                 schedulingGroup={"podGroupName": "train"})
    assert admit(service, member)[0]["allowed"] is True
    made = cluster.get(PODGROUPS, "train", "default")
    assert made["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid"}]


def test_a_job_whose_group_has_a_pod_group_of_another_size_is_refused_naming_both(
        settings, cluster) -> None:
    cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
    bigger = job()
    bigger["spec"]["parallelism"] = bigger["spec"]["completions"] = 8
    response, _, _ = _admit_job(settings, cluster, bigger)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "PodGroup default/train has minCount 4, but this gang needs 8" in message
    assert _min_count(cluster, "train") == 4


def test_a_job_whose_group_has_a_pod_group_of_its_size_makes_none(settings, cluster) -> None:
    cluster.create(PODGROUPS, pod_group_body("train", "default", 4), "default")
    counting = Counting(cluster)
    response, _, _ = _admit_job(settings, counting, job(), inner=cluster)
    assert response["allowed"] is True
    assert counting.calls[0] == "get podgroups"  # admission; then the controller's create
    assert "create podgroups" not in counting.calls[1:] or _min_count(cluster, "train") == 4


def test_the_templates_group_size_wins_over_the_jobs_parallelism(settings, cluster) -> None:
    sized = job()
    sized["spec"]["template"]["metadata"]["annotations"] = {names.GROUP_SIZE_ANNOTATION: "2"}
    _admit_job(settings, cluster, sized)
    assert _min_count(cluster, "train") == 2


def test_a_dry_run_job_makes_no_pod_group(settings, cluster) -> None:
    service = AdmissionService(settings, [JobGroupHandler()], cluster=cluster)
    response, patched = _review_job(service, job(), dry_run=True)
    assert response["allowed"] is True
    assert patched["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "train"}
    assert cluster.get(PODGROUPS, "train", "default") is None


def test_a_job_naming_its_own_group_already_gets_the_pod_group_and_no_patch(
        settings, cluster) -> None:
    named = job(schedulingGroup={"podGroupName": "train"})
    response, stored, _ = _admit_job(settings, cluster, named)
    assert response["allowed"] is True
    assert decode_patch(response) == [{"op": "add", "path": "/metadata/labels",
                                       "value": {names.GROUP_LABEL: "train"}}]
    assert _min_count(cluster, "train") == 4


def test_a_pod_of_a_job_whose_pod_group_is_being_written_waits_for_that_write(
        settings, cluster) -> None:
    counting = Counting(cluster)
    writer = BackgroundWriter()
    service = AdmissionService(settings, [GangHandler()], cluster=counting, writer=writer)
    gate = threading.Event()
    writer.submit(Write(("podgroups", "default", "train"), "held", lambda: gate.wait(10) and None))
    member = pod("train-0", group="train", job="train", schedulingGroup={"podGroupName": "train"})
    response, _ = admit(service, member)
    gate.set()
    writer.close()
    assert response["allowed"] is True
    assert counting.calls == []  # neither a read of the Job nor a second create


def test_a_job_over_the_group_limit_is_admitted_and_its_pods_refused(settings, cluster) -> None:
    service = AdmissionService(settings, [JobGroupHandler(), GangHandler()], cluster=cluster)
    huge = job()
    huge["spec"]["parallelism"] = MAX_GROUP_SIZE + 1
    response, _ = _review_job(service, huge)
    assert response["allowed"] is True
    assert cluster.get(PODGROUPS, "train", "default") is None
    cluster.create("jobs", huge, "default")
    response, _ = admit(service, pod("train-0", group="train", job="train"))
    assert response["allowed"] is False
    assert "more than Fluence's limit" in response["status"]["message"]


def test_a_shared_quantum_job_gets_the_scout_and_worker_pod_groups(settings, cluster) -> None:
    service = AdmissionService(settings, [JobGroupHandler()], cluster=cluster)
    quantum = job(group="qj")
    template = shared("qj-0", 0)
    quantum["spec"]["template"] = {
        "metadata": {"labels": {names.GROUP_LABEL: "qj"},
                     "annotations": template["metadata"]["annotations"]},
        "spec": template["spec"]}
    cluster.delete("jobs", "qj", "default")  # the fixture's; this one replaces it
    quantum["metadata"]["name"] = "qj"
    _admit_job(settings, cluster, quantum)
    assert _min_count(cluster, "qj" + names.SCOUT_GROUP_SUFFIX) == 1
    assert _min_count(cluster, "qj") == 3
    service = AdmissionService(settings, [QuantumSplitHandler(settings), GangHandler()],
                               cluster=cluster)
    for index in range(2):  # the split points the pods at exactly these
        response, out = admit(service, shared(f"qj-{index}", index))
        assert response["allowed"] is True
        expected = "qj" + (names.SCOUT_GROUP_SUFFIX if index == 0 else "")
        assert out["spec"]["schedulingGroup"] == {"podGroupName": expected}
