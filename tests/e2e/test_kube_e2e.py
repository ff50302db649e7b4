"""The Kubernetes wrapper against a real kube-apiserver, and the fake against the same checks.

Every test runs twice: on :class:`FakeCluster` and on :class:`KubeCluster`
talking to the API server the session started (``e2e``-marked, skipped without
``KUBEBUILDER_ASSETS``). Passing on both is what lets the unit tests of the
scheduler, the webhook and the sidecar trust the fake.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import ADDED, DELETED, MODIFIED, ClusterAPI, WatchEvent
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError, Conflict, NotFound
from fluence_core.testing import make_node_dict, make_pod_dict


@dataclass
class Env:
    """The cluster under test, a namespace of the test's own, and how long a watch waits."""

    api: ClusterAPI
    ns: str
    real: bool

    @property
    def settle(self) -> float:
        # The fake has every event already; a real server needs a (whole) second.
        return 1.0 if self.real else 0.0

    def watch(self, resource: str, rv: str, **selectors: Any) -> list[WatchEvent]:
        return list(self.api.watch(resource, self.ns if resource != "nodes" else None,
                                   resource_version=rv, timeout=self.settle, **selectors))

    def node(self, suffix: str) -> str:
        return f"{self.ns}-{suffix}"


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.e2e)])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    if request.param == "fake":
        yield Env(FakeCluster(), "default", real=False)
    else:
        yield Env(request.getfixturevalue("kube"), request.getfixturevalue("kube_namespace"),
                  real=True)


def pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pod as a client posts it: the namespace is the request's, ``spec`` set over."""
    return make_pod_dict(name, None, namespace=None, **spec)


def node(name: str) -> dict[str, Any]:
    """An 8-core node, as the kubelet would report it, labelled as this suite's."""
    return make_node_dict(name, labels={"fluence-e2e": "yes"}, capacity=True)


def gang(name: str, min_count: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def test_node_is_created_with_its_capacity(env: Env) -> None:
    created = env.api.create("nodes", node(env.node("n1")))
    assert created["status"]["allocatable"]["cpu"] == "8"
    found = env.api.list("nodes", label_selector="fluence-e2e=yes",
                         field_selector=f"metadata.name={env.node('n1')}")
    assert [n["metadata"]["name"] for n in found.items] == [env.node("n1")]


def test_pod_starts_pending_whatever_status_it_was_given(env: Env) -> None:
    created = env.api.create("pods", {**pod("p"), "status": {"phase": "Running"}}, env.ns)
    assert created["status"]["phase"] == "Pending"
    assert created["spec"]["priority"] == 0


def test_pending_pods_of_fluence_are_found_by_field_selector(env: Env) -> None:
    env.api.create("pods", pod("mine"), env.ns)
    env.api.create("pods", pod("other", schedulerName="default-scheduler"), env.ns)
    env.api.create("pods", pod("bound", nodeName=env.node("n1")), env.ns)
    pending = env.api.list("pods", env.ns,
                           field_selector="spec.schedulerName=fluence,spec.nodeName=")
    assert [p["metadata"]["name"] for p in pending.items] == ["mine"]
    assert pending.items[0]["kind"] == "Pod"


def test_unsupported_field_selector_is_a_bad_request(env: Env) -> None:
    with pytest.raises(ApiError) as caught:
        env.api.list("pods", env.ns, field_selector="spec.priority=0")
    assert caught.value.status == 400


def test_podgroup_gets_server_defaults_and_drops_client_status(env: Env) -> None:
    body = {**gang("g", 4), "status": {"conditions": [{
        "type": "PodGroupScheduled", "status": "True", "reason": "Forged", "message": "",
        "lastTransitionTime": "2020-01-01T00:00:00Z"}]}}
    created = env.api.create("podgroups", body, env.ns)
    assert created["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert created["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert created["spec"]["disruptionMode"] == "Pod"
    assert names.PODGROUP_FINALIZER in created["metadata"]["finalizers"]
    assert not created.get("status")
    assert env.api.get("podgroups", "g", env.ns) is not None


def test_podgroup_needs_exactly_one_policy(env: Env) -> None:
    body = {"metadata": {"name": "bad"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}, "basic": {}}}}
    with pytest.raises(ApiError) as caught:
        env.api.create("podgroups", body, env.ns)
    assert caught.value.status == 422


def test_podgroup_policy_is_immutable(env: Env) -> None:
    env.api.create("podgroups", gang("g", 4), env.ns)
    with pytest.raises(ApiError) as caught:
        env.api.patch("podgroups", "g", {"spec": {"schedulingPolicy": {"gang": {"minCount": 5}}}},
                      env.ns)
    assert caught.value.status == 422


def test_podgroup_takes_annotations_and_a_scheduled_condition(env: Env) -> None:
    env.api.create("podgroups", gang("g", 2), env.ns)
    annotated = env.api.patch("podgroups", "g",
                              {"metadata": {"annotations": {"fluence.flux-framework.org/jobids":
                                                            "[1, 2]"}}}, env.ns)
    assert annotated["metadata"]["annotations"]["fluence.flux-framework.org/jobids"] == "[1, 2]"
    condition = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
                 "message": "all 2 pods bound", "lastTransitionTime": "2026-01-01T00:00:00Z",
                 "observedGeneration": 1}
    updated = env.api.patch_status("podgroups", "g", {"status": {"conditions": [condition]}},
                                   env.ns)
    assert updated["status"]["conditions"] == [condition]


def test_pod_points_at_its_podgroup_through_scheduling_group(env: Env) -> None:
    env.api.create("podgroups", gang("g", 2), env.ns)
    created = env.api.create("pods", pod("m0", schedulingGroup={"podGroupName": "g"}), env.ns)
    assert created["spec"]["schedulingGroup"] == {"podGroupName": "g"}


def test_bind_sets_node_name_and_pod_scheduled(env: Env) -> None:
    env.api.create("nodes", node(env.node("n1")))
    env.api.create("pods", pod("p"), env.ns)
    env.api.bind(env.ns, "p", env.node("n1"))
    bound = env.api.get("pods", "p", env.ns)
    assert bound is not None
    assert bound["spec"]["nodeName"] == env.node("n1")
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]


def test_second_bind_is_a_conflict(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    env.api.bind(env.ns, "p", env.node("n1"))
    with pytest.raises(Conflict, match="already assigned"):
        env.api.bind(env.ns, "p", env.node("n2"))


def test_binding_a_gated_pod_is_a_conflict(env: Env) -> None:
    env.api.create("pods", pod("p", schedulingGates=[{"name": "quantum.braket/ready"}]), env.ns)
    with pytest.raises(Conflict, match="schedulingGates"):
        env.api.bind(env.ns, "p", env.node("n1"))


def test_ungated_pod_can_be_bound(env: Env) -> None:
    env.api.create("pods", pod("p", schedulingGates=[{"name": "quantum.braket/ready"}]), env.ns)
    env.api.patch("pods", "p", {"spec": {"schedulingGates": None}}, env.ns)
    env.api.bind(env.ns, "p", env.node("n1"))


def test_adding_a_gate_or_a_node_name_by_patch_is_invalid(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    for change in ({"schedulingGates": [{"name": "g"}]}, {"nodeName": env.node("n1")}):
        with pytest.raises(ApiError) as caught:
            env.api.patch("pods", "p", {"spec": change}, env.ns)
        assert caught.value.status == 422


def test_binding_with_another_uid_is_a_conflict(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    with pytest.raises(Conflict):
        env.api.bind(env.ns, "p", env.node("n1"), uid="00000000-0000-4000-8000-000000000000")


def test_binding_a_missing_pod_is_not_found(env: Env) -> None:
    with pytest.raises(NotFound):
        env.api.bind(env.ns, "ghost", env.node("n1"))


def test_watch_sees_create_bind_and_delete(env: Env) -> None:
    start = env.api.create("pods", pod("anchor"), env.ns)["metadata"]["resourceVersion"]
    env.api.create("pods", pod("p"), env.ns)
    env.api.bind(env.ns, "p", env.node("n1"))
    env.api.delete("pods", "p", env.ns, grace_period_seconds=0)
    events = env.watch("pods", start)
    # Even with grace 0 a bound pod is first marked terminating, then removed.
    assert [(t, o["metadata"]["name"]) for t, o in events] == [
        (ADDED, "p"), (MODIFIED, "p"), (MODIFIED, "p"), (DELETED, "p")]
    assert events[1][1]["spec"]["nodeName"] == env.node("n1")
    assert events[2][1]["metadata"]["deletionTimestamp"]


def test_watch_of_unbound_pods_sees_a_bound_pod_leave(env: Env) -> None:
    start = env.api.create("pods", pod("p"), env.ns)["metadata"]["resourceVersion"]
    env.api.bind(env.ns, "p", env.node("n1"))
    seen = [(t, o["metadata"]["name"]) for t, o in
            env.watch("pods", start, field_selector="spec.nodeName=")]
    assert seen == [(DELETED, "p")]


def test_watch_without_version_starts_with_existing_objects(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    events = list(env.api.watch("pods", env.ns, timeout=env.settle))
    assert [(t, o["metadata"]["name"]) for t, o in events] == [(ADDED, "p")]


def test_status_changes_only_through_the_status_subresource(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    env.api.bind(env.ns, "p", env.node("n1"))
    ignored = env.api.patch("pods", "p", {"status": {"phase": "Succeeded"}}, env.ns)
    assert ignored["status"]["phase"] == "Pending"
    done = env.api.patch_status("pods", "p", {"status": {"phase": "Succeeded"}}, env.ns)
    assert done["status"]["phase"] == "Succeeded"
    finished = env.api.list("pods", env.ns, field_selector="status.phase=Succeeded")
    assert [p["metadata"]["name"] for p in finished.items] == ["p"]


def test_kinds_without_status_have_no_status_endpoint(env: Env) -> None:
    with pytest.raises(NotFound):
        env.api.patch_status("events", "x", {"status": {}}, env.ns)


def test_events_are_posted_about_pods_and_nodes(env: Env) -> None:
    target = env.api.create("pods", pod("p"), env.ns)
    event = env.api.post_event(target, "Warning", "FailedScheduling", "gang g: 1/2 members",
                               action="Scheduling")
    assert event["metadata"]["namespace"] == env.ns
    found = env.api.list("events", env.ns, field_selector="involvedObject.name=p,reason="
                         "FailedScheduling").items
    assert [(e["type"], e["message"], e["involvedObject"]["uid"]) for e in found] == [
        ("Warning", "gang g: 1/2 members", target["metadata"]["uid"])]
    machine = env.api.create("nodes", node(env.node("n9")))
    assert env.api.post_event(machine, "Normal", "Test", "x")["metadata"]["namespace"] == "default"


def test_merge_patch_with_a_stale_version_is_a_conflict(env: Env) -> None:
    created = env.api.create("pods", pod("p"), env.ns)
    env.api.patch("pods", "p", {"metadata": {"labels": {"x": "1"}}}, env.ns)
    with pytest.raises(Conflict):
        env.api.patch("pods", "p", {"metadata": {
            "resourceVersion": created["metadata"]["resourceVersion"], "labels": {"x": "2"}}},
            env.ns)


def test_a_patch_that_changes_nothing_keeps_the_version(env: Env) -> None:
    created = env.api.create("pods", {**pod("p"), "metadata": {"name": "p", "labels": {"x": "1"}}},
                             env.ns)
    same = env.api.patch("pods", "p", {"metadata": {"labels": {"x": "1"}}}, env.ns)
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_json_patch_applies_and_a_failed_test_is_invalid(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    patched = env.api.patch("pods", "p", [
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}}], env.ns,
        patch_type="json")
    assert patched["metadata"]["annotations"] == {"a": "1"}
    with pytest.raises(ApiError) as caught:
        env.api.patch("pods", "p", [{"op": "test", "path": "/metadata/name", "value": "q"}],
                      env.ns, patch_type="json")
    assert caught.value.status == 422


def test_lease_replace_with_a_stale_version_is_a_conflict(env: Env) -> None:
    lease = env.api.create("leases", {"metadata": {"name": "fluence"},
                                      "spec": {"holderIdentity": "a"}}, env.ns)
    lease["spec"]["holderIdentity"] = "b"
    assert env.api.replace("leases", lease)["spec"]["holderIdentity"] == "b"
    with pytest.raises(Conflict):
        env.api.replace("leases", lease)


def test_create_conflicts_and_missing_namespaces(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    with pytest.raises(Conflict) as caught:
        env.api.create("pods", pod("p"), env.ns)
    assert caught.value.reason == "AlreadyExists"
    with pytest.raises(NotFound):
        env.api.create("pods", pod("p"), "no-such-namespace")


def test_delete_reports_whether_something_was_deleted(env: Env) -> None:
    env.api.create("pods", pod("p"), env.ns)
    assert env.api.delete("pods", "p", env.ns) is True
    assert env.api.get("pods", "p", env.ns) is None
    assert env.api.delete("pods", "p", env.ns) is False


@pytest.mark.e2e
def test_bound_pod_deleted_gracefully_lingers_without_a_kubelet(kube: ClusterAPI,
                                                                kube_namespace: str) -> None:
    """What the fake simplifies away: a bound pod waits for a kubelet that never comes."""
    kube.create("pods", pod("p"), kube_namespace)
    kube.bind(kube_namespace, "p", "nowhere")
    assert kube.delete("pods", "p", kube_namespace) is True
    lingering = kube.get("pods", "p", kube_namespace)
    assert lingering is not None and lingering["metadata"].get("deletionTimestamp")
    assert kube.delete("pods", "p", kube_namespace, grace_period_seconds=0) is True
    assert kube.get("pods", "p", kube_namespace) is None


@pytest.mark.e2e
def test_indexed_job_gets_a_gang_podgroup_from_the_job_controller(
        apiserver: Any, kube: ClusterAPI, kube_namespace: str) -> None:
    if not apiserver.controller_manager:
        pytest.skip("kube-controller-manager not in KUBEBUILDER_ASSETS: no Job controller")
    template = {"spec": {"schedulerName": "fluence", "restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]}}
    kube.create("jobs", {"metadata": {"name": "j"}, "spec": {
        "completionMode": "Indexed", "parallelism": 3, "completions": 3, "template": template}},
        kube_namespace)
    deadline = time.monotonic() + 30
    groups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    while time.monotonic() < deadline and (not groups or len(pods) < 3):
        groups = kube.list("podgroups", kube_namespace).items
        pods = kube.list("pods", kube_namespace).items
        time.sleep(0.3)
    assert len(groups) == 1, "no PodGroup for the Indexed Job"
    assert groups[0]["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert len(pods) == 3
    assert {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in pods} == {
        groups[0]["metadata"]["name"]}
    assert all(not p["spec"].get("nodeName") for p in pods)
