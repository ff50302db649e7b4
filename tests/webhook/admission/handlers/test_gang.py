"""The ``gang`` handler: a grouped pod points at its PodGroup, sized from its annotation or
its Job, and a bad size is refused naming the handler."""

from __future__ import annotations

from webhook_helpers import admit, pod

from fluence_core import names


def podgroup(cluster, name):
    return cluster.get("podgroups", name, "default")


def test_gang_points_the_pod_at_a_podgroup_sized_by_the_annotation(service, cluster):
    _, out = admit(service, pod("g-0", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "3"}))
    assert out["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    created = podgroup(cluster, "g")
    assert created["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    assert created["metadata"]["labels"][names.MANAGED_BY_LABEL] == names.SCHEDULER_NAME


def test_gang_size_falls_back_to_the_owning_jobs_parallelism_then_one(service, cluster):
    admit(service, pod("a", group="from-job", job="qj"))
    admit(service, pod("b", group="alone"))
    assert podgroup(cluster, "from-job")["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert podgroup(cluster, "alone")["spec"]["schedulingPolicy"]["gang"]["minCount"] == 1


def test_gang_reuses_an_existing_podgroup(service, cluster):
    admit(service, pod("g-0", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "2"}))
    response, out = admit(
        service, pod("g-1", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "2"})
    )
    assert response["allowed"] and out["spec"]["schedulingGroup"]["podGroupName"] == "g"
    assert len(cluster.list("podgroups", "default").items) == 1


def test_gang_keeps_a_scheduling_group_the_job_controller_set(service, cluster):
    obj = pod("w", group="g", schedulingGroup={"podGroupName": "job-made"})
    response, out = admit(service, obj)
    assert "patch" not in response and out["spec"]["schedulingGroup"]["podGroupName"] == "job-made"
    assert podgroup(cluster, "g") is None


def test_gang_on_a_dry_run_patches_but_creates_nothing(service, cluster):
    _, out = admit(service, pod("g-0", group="g"), dry_run=True)
    assert out["spec"]["schedulingGroup"]["podGroupName"] == "g"
    assert podgroup(cluster, "g") is None


def test_a_bad_group_size_is_refused_naming_the_handler(service):
    response, _ = admit(
        service, pod("g-0", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "x"})
    )
    assert not response["allowed"]
    assert "handler gang" in response["status"]["message"]
    assert names.GROUP_SIZE_ANNOTATION in response["status"]["message"]
