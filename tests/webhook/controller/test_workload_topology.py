"""A topology constraint written only on the workload (a Job, its pod template, its JobSet,
its TrainJob) reaches the PodGroup the webhook's controller makes for it."""

from __future__ import annotations

from typing import Any

from tests.webhook.admission.handlers.test_job_group import _admit_job, job
from webhook_helpers import admit, pod

from fluence_core import names
from fluence_core.kube.api import JOBSETS, PODGROUPS, TRAINJOBS
from fluence_core.stated_topology import read_constraint
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.controller.informer import slim_job
from fluence_core.webhook.admission.review import AdmissionService

REQUIRED = names.TOPOLOGY_REQUIRED_ANNOTATION
PREFERRED = names.TOPOLOGY_PREFERRED_ANNOTATION


def _made(cluster: Any) -> dict[str, Any]:
    made = cluster.get(PODGROUPS, "train", "default")
    assert made is not None
    return made


def _owned_by(obj: dict[str, Any], kind: str, owner: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [{
        "apiVersion": owner["apiVersion"], "kind": kind, "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": True}]
    return obj


def test_a_jobs_own_annotation_becomes_its_pod_groups_required_constraint(
        settings, cluster) -> None:
    grouped = job()
    grouped["metadata"]["annotations"] = {REQUIRED: names.RACK_LABEL}
    _admit_job(settings, cluster, grouped)
    made = _made(cluster)
    assert made["spec"]["schedulingConstraints"] == {"topology": [{"key": names.RACK_LABEL}]}
    assert made["metadata"]["annotations"][REQUIRED] == names.RACK_LABEL
    assert read_constraint(made, []).required == (names.RACK_LABEL, names.RACK_LABEL)


def test_a_preferred_level_on_the_job_is_carried_as_an_annotation_only(settings, cluster) -> None:
    grouped = job()
    grouped["metadata"]["annotations"] = {PREFERRED: "rack"}
    _admit_job(settings, cluster, grouped)
    made = _made(cluster)
    assert "schedulingConstraints" not in made["spec"]
    assert read_constraint(made, []).preferred == ("rack",)


def test_the_pod_templates_annotation_wins_over_the_jobs_for_the_same_key(
        settings, cluster) -> None:
    grouped = job()
    grouped["metadata"]["annotations"] = {REQUIRED: "example.com/block"}
    grouped["spec"]["template"]["metadata"]["annotations"] = {REQUIRED: names.RACK_LABEL}
    _admit_job(settings, cluster, grouped)
    assert _made(cluster)["metadata"]["annotations"] == {REQUIRED: names.RACK_LABEL}


def test_a_job_stating_nothing_gets_a_pod_group_without_constraints(settings, cluster) -> None:
    _admit_job(settings, cluster, job())
    made = _made(cluster)
    assert "schedulingConstraints" not in made["spec"]
    assert not (made["metadata"].get("annotations") or {})


def _jobset(cluster: Any, annotations: dict[str, str], owner: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "js", "annotations": annotations},
                            "spec": {"replicatedJobs": []}}
    if owner is not None:
        _owned_by(body, "TrainJob", owner)
    made: dict[str, Any] = cluster.create(JOBSETS, body, "default")
    return made


def test_a_jobsets_annotation_reaches_the_pod_group_of_its_jobs(settings, cluster) -> None:
    jobset = _jobset(cluster, {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL})
    _admit_job(settings, cluster, _owned_by(job(), "JobSet", jobset))
    made = _made(cluster)
    assert made["spec"]["schedulingConstraints"] == {"topology": [{"key": names.RACK_LABEL}]}
    assert read_constraint(made, []).source.startswith("PodGroup default/train spec.")


def test_a_trainjobs_annotation_reaches_through_its_jobset(settings, cluster) -> None:
    trainjob = cluster.create(TRAINJOBS, {"metadata": {
        "name": "tj", "annotations": {REQUIRED: names.ZONE_LABEL}}, "spec": {}}, "default")
    jobset = _jobset(cluster, {PREFERRED: "rack"}, owner=trainjob)
    _admit_job(settings, cluster, _owned_by(job(), "JobSet", jobset))
    made = _made(cluster)
    assert made["metadata"]["annotations"] == {REQUIRED: names.ZONE_LABEL, PREFERRED: "rack"}
    assert made["spec"]["schedulingConstraints"] == {"topology": [{"key": names.ZONE_LABEL}]}


def test_an_owner_of_the_same_name_but_another_uid_states_nothing(settings, cluster) -> None:
    jobset = _jobset(cluster, {REQUIRED: names.RACK_LABEL})
    stale = _owned_by(job(), "JobSet", jobset)
    stale["metadata"]["ownerReferences"][0]["uid"] = "an-earlier-jobset"
    _admit_job(settings, cluster, stale)
    assert "schedulingConstraints" not in _made(cluster)["spec"]


def test_two_different_required_levels_stay_annotations_for_the_scheduler_to_narrow(
        settings, cluster) -> None:
    grouped = job()
    grouped["metadata"]["annotations"] = {REQUIRED: "rack",
                                          names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: "block"}
    _admit_job(settings, cluster, grouped)
    made = _made(cluster)
    assert "schedulingConstraints" not in made["spec"]
    assert sorted(read_constraint(made, []).required) == ["block", "rack"]


def test_a_pod_whose_job_missed_the_handler_gets_its_jobs_topology_on_the_pod_group(
        settings, cluster) -> None:
    stored = cluster.create("jobs", {"metadata": {
        "name": "train", "annotations": {REQUIRED: names.RACK_LABEL}},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": []}}}}, "default")
    member = pod("train-0", group="train", job="train", index=0,
                 schedulingGroup={"podGroupName": "train"})
    member["metadata"]["ownerReferences"][0]["uid"] = stored["metadata"]["uid"]
    service = AdmissionService(settings, [GangHandler()], cluster=cluster)
    assert admit(service, member)[0]["allowed"] is True
    made = _made(cluster)
    assert made["spec"]["schedulingConstraints"] == {"topology": [{"key": names.RACK_LABEL}]}


def test_the_webhooks_slim_job_keeps_the_topology_and_owners_it_states() -> None:
    grouped = job()
    grouped["metadata"].update(annotations={REQUIRED: "rack", "other": "x" * 1000},
                               ownerReferences=[{"kind": "JobSet", "name": "js"}])
    grouped["spec"]["template"]["metadata"]["annotations"] = {PREFERRED: "rack", "o": "y"}
    slim = slim_job(grouped)
    assert slim["metadata"]["annotations"] == {REQUIRED: "rack"}
    assert slim["metadata"]["ownerReferences"] == [{"kind": "JobSet", "name": "js"}]
    assert slim["spec"]["template"]["metadata"]["annotations"] == {PREFERRED: "rack"}


def test_a_group_of_podsets_on_a_jobs_template_is_scoped_to_its_jobset(
        settings, cluster) -> None:
    jobset = _jobset(cluster, {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL})
    grouped = _owned_by(job(), "JobSet", jobset)
    grouped["spec"]["template"]["metadata"]["annotations"] = {
        names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}
    _admit_job(settings, cluster, grouped)
    carried = _made(cluster)["metadata"]["annotations"]
    assert carried[names.KUEUE_PODSET_GROUP_ANNOTATION] == "lw"
    assert carried[names.PODSET_GROUP_WORKLOAD_ANNOTATION] == "JobSet/js"
    assert read_constraint(_made(cluster), []).podset_group == "lw"


def test_a_lone_jobs_group_of_podsets_names_no_workload(settings, cluster) -> None:
    grouped = job()
    grouped["metadata"]["annotations"] = {names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}
    _admit_job(settings, cluster, grouped)
    carried = _made(cluster)["metadata"]["annotations"]
    assert carried == {names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}
