"""Admission shares its reads for a few seconds (issue 20): the pods of a group cost one call."""

from __future__ import annotations


import pytest
from webhook_helpers import Counting, admit, pod

from fluence_core import names
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.controller.recent import TTL, Recent
from fluence_core.webhook.admission.review import AdmissionService
from fluence_core.testing import ManualClock




@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def counting(cluster) -> Counting:
    return Counting(cluster)


@pytest.fixture
def gang(settings, counting, clock) -> AdmissionService:
    return AdmissionService(settings, [GangHandler()], cluster=counting, clock=clock)


def test_an_entry_is_served_until_its_ttl_then_read_again(clock):
    recent = Recent(clock=clock)
    reads: list[int] = []
    for _ in range(3):
        recent.get("k", lambda: reads.append(1) or len(reads))
    clock.now += TTL
    assert recent.get("k", lambda: reads.append(1) or len(reads)) == 2
    assert len(reads) == 2


def test_a_failed_read_is_not_remembered(clock):
    recent = Recent(clock=clock)

    def fail() -> int:
        raise RuntimeError("API down")

    with pytest.raises(RuntimeError):
        recent.get("k", fail)
    assert recent.lookup("k") == (False, None)


def test_the_pods_of_a_jobs_group_cost_one_job_read_and_one_podgroup_create(
        gang, counting, cluster):
    for i in range(4):
        response, out = admit(gang, pod(f"qj-{i}", group="qj", job="qj"), uid=f"u{i}")
        assert response["allowed"] and out["spec"]["schedulingGroup"] == {"podGroupName": "qj"}
    assert counting.calls == ["get jobs", "create podgroups"]
    assert cluster.get("podgroups", "qj", "default")["spec"]["schedulingPolicy"]["gang"] == {
        "minCount": 4}


def test_a_podgroup_that_exists_already_costs_a_create_answered_conflict_and_a_read(
        gang, counting, cluster):
    admit(gang, pod("g-0", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "2"}))
    cluster.delete("podgroups", "g", "default")
    other = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
             "metadata": {"name": "other", "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 9}}}}
    cluster.create("podgroups", other, "default")
    fresh = AdmissionService(gang.settings, [GangHandler()], cluster=counting)
    counting.calls.clear()
    response, out = admit(fresh, pod("o-0", group="other"))
    assert response["allowed"] and out["spec"]["schedulingGroup"] == {"podGroupName": "other"}
    assert counting.calls == ["create podgroups", "get podgroups"]  # the read: its minCount
    assert cluster.get("podgroups", "other", "default")["spec"]["schedulingPolicy"]["gang"] == {
        "minCount": 9}
    # its size is known now: the gang's next pod is refused naming both, asking nothing
    response, _ = admit(fresh, pod("o-1", group="other"), uid="u2")
    assert response["allowed"] is False
    assert "PodGroup default/other has minCount 9, but this gang needs 1" in (
        response["status"]["message"])
    assert counting.calls == ["create podgroups", "get podgroups"]


def test_a_pod_disagreeing_with_its_siblings_group_size_is_refused_naming_both(
        gang, counting, cluster):
    admit(gang, pod("g-0", group="g", annotations={names.GROUP_SIZE_ANNOTATION: "4"}))
    calls = list(counting.calls)
    response, _ = admit(gang, pod("g-1", group="g", annotations={
        names.GROUP_SIZE_ANNOTATION: "2"}), uid="u2")
    assert response["allowed"] is False
    assert "PodGroup default/g has minCount 4, but this gang needs 2" in (
        response["status"]["message"])
    assert counting.calls == calls  # known from the sibling's admission: no call


def test_a_podgroup_deleted_is_made_again_once_the_memory_of_it_expired(gang, cluster, clock):
    admit(gang, pod("g-0", group="g"))
    cluster.delete("podgroups", "g", "default")
    clock.now += TTL
    admit(gang, pod("g-1", group="g"), uid="u2")
    assert cluster.get("podgroups", "g", "default") is not None


def test_a_dry_run_leaves_nothing_remembered_and_the_real_create_makes_the_group(gang, cluster):
    admit(gang, pod("g-0", group="g"), dry_run=True)
    assert cluster.get("podgroups", "g", "default") is None
    admit(gang, pod("g-0", group="g"), uid="u2")
    assert cluster.get("podgroups", "g", "default") is not None


