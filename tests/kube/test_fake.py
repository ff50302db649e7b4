"""The in-memory cluster behaves like the API server where Fluence depends on it.

Each behaviour here is also checked against a real kube-apiserver in
tests/e2e/test_kube_e2e.py, so a test that passes on the fake means the same
on a cluster.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import ADDED, DELETED, MODIFIED, RESYNC, Cancellation, ClusterAPI
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError, Conflict, NotFound
from fluence_core.testing import make_node_dict, make_pod_dict


def pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pod as a client posts it: the namespace is the request's, ``spec`` set over."""
    return make_pod_dict(name, None, namespace=None, **spec)


def gang(name: str, min_count: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


def test_fake_satisfies_the_protocol(cluster: FakeCluster) -> None:
    api: ClusterAPI = cluster
    assert isinstance(api, ClusterAPI)


def test_every_write_gets_a_higher_resource_version(cluster: FakeCluster) -> None:
    first = cluster.create("pods", pod("a"), "default")
    second = cluster.create("pods", pod("b"), "default")
    patched = cluster.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
    versions = [int(o["metadata"]["resourceVersion"]) for o in (first, second, patched)]
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_create_fills_metadata_and_resets_pod_status(cluster: FakeCluster) -> None:
    sent = {key: value for key, value in pod("a").items() if key not in ("apiVersion", "kind")}
    created = cluster.create("pods", {**sent, "status": {"phase": "Running"}}, "default")
    assert created["kind"] == "Pod" and created["apiVersion"] == "v1"
    assert created["metadata"]["uid"] and created["metadata"]["creationTimestamp"]
    assert created["status"] == {"phase": "Pending"}
    assert created["spec"]["priority"] == 0


def test_nodes_keep_the_status_they_are_created_with(cluster: FakeCluster) -> None:
    created = cluster.create("nodes", make_node_dict("n1"))
    assert created["status"]["allocatable"]["cpu"] == "8"
    assert "namespace" not in created["metadata"]


def test_create_with_a_taken_name_is_a_conflict(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    with pytest.raises(Conflict) as caught:
        cluster.create("pods", pod("a"), "default")
    assert caught.value.reason == "AlreadyExists"


def test_create_in_a_missing_namespace_is_not_found(cluster: FakeCluster) -> None:
    with pytest.raises(NotFound):
        cluster.create("pods", pod("a"), "nowhere")


def test_generate_name_gives_distinct_names(cluster: FakeCluster) -> None:
    body = {"metadata": {"generateName": "w-"}, "spec": pod("x")["spec"]}
    names = {cluster.create("pods", body, "default")["metadata"]["name"] for _ in range(3)}
    assert len(names) == 3 and all(n.startswith("w-") for n in names)


def test_get_returns_none_for_a_missing_object(cluster: FakeCluster) -> None:
    assert cluster.get("pods", "nope", "default") is None


def test_get_returns_a_copy(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    got = cluster.get("pods", "a", "default")
    assert got is not None
    got["spec"]["nodeName"] = "mutated"
    again = cluster.get("pods", "a", "default")
    assert again is not None and "nodeName" not in again["spec"]


def test_list_filters_by_the_scheduler_field_selectors(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("mine"), "default")
    cluster.create("pods", pod("theirs", schedulerName="default-scheduler"), "default")
    cluster.create("pods", pod("bound", nodeName="n1"), "default")
    pending = cluster.list("pods", field_selector="spec.schedulerName=fluence,spec.nodeName=")
    assert [p["metadata"]["name"] for p in pending.items] == ["mine"]
    not_pending = cluster.list("pods", field_selector="status.phase!=Pending")
    assert not_pending.items == []
    named = cluster.list("pods", "default", field_selector="metadata.name==theirs")
    assert [p["metadata"]["name"] for p in named.items] == ["theirs"]


def test_list_refuses_an_unsupported_field_like_the_server(cluster: FakeCluster) -> None:
    with pytest.raises(ApiError) as caught:
        cluster.list("pods", field_selector="spec.priority=0")
    assert caught.value.status == 400


def test_list_filters_by_label_selector(cluster: FakeCluster) -> None:
    for name, labels in [("a", {"g": "x", "t": "1"}), ("b", {"g": "y"}), ("c", {})]:
        cluster.create("pods", {**pod(name), "metadata": {"name": name, "labels": labels}},
                       "default")

    def names(selector: str) -> list[str]:
        return [p["metadata"]["name"] for p in cluster.list("pods", label_selector=selector).items]

    assert names("g=x") == ["a"]
    assert names("g in (x, y)") == ["a", "b"]
    assert names("g notin (x)") == ["b", "c"]
    assert names("g!=x") == ["b", "c"]
    assert names("g,!t") == ["b"]


def test_list_carries_the_current_resource_version(cluster: FakeCluster) -> None:
    created = cluster.create("pods", pod("a"), "default")
    assert cluster.list("pods").resource_version == created["metadata"]["resourceVersion"]


def test_list_is_scoped_to_a_namespace(cluster: FakeCluster) -> None:
    cluster.create("namespaces", {"metadata": {"name": "other"}})
    cluster.create("pods", pod("a"), "default")
    cluster.create("pods", pod("b"), "other")
    assert [p["metadata"]["name"] for p in cluster.list("pods", "other").items] == ["b"]
    assert len(cluster.list("pods").items) == 2


def test_bind_sets_node_name_and_pod_scheduled(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    cluster.bind("default", "a", "n1")
    bound = cluster.get("pods", "a", "default")
    assert bound is not None and bound["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][
        0
    ].items()


def test_second_bind_is_a_conflict(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    cluster.bind("default", "a", "n1")
    with pytest.raises(Conflict, match="already assigned"):
        cluster.bind("default", "a", "n2")


def test_binding_a_gated_pod_is_a_conflict(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a", schedulingGates=[{"name": "quantum.braket/ready"}]),
                   "default")
    with pytest.raises(Conflict, match="schedulingGates"):
        cluster.bind("default", "a", "n1")


def test_binding_with_a_stale_uid_is_a_conflict(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    with pytest.raises(Conflict, match="Precondition"):
        cluster.bind("default", "a", "n1", uid="not-the-uid")


def test_binding_a_missing_pod_is_not_found(cluster: FakeCluster) -> None:
    with pytest.raises(NotFound):
        cluster.bind("default", "ghost", "n1")


def test_removing_a_gate_is_allowed_adding_one_is_not(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a", schedulingGates=[{"name": "g"}]), "default")
    ungated = cluster.patch("pods", "a", {"spec": {"schedulingGates": None}}, "default")
    assert "schedulingGates" not in ungated["spec"]
    with pytest.raises(ApiError) as caught:
        cluster.patch("pods", "a", {"spec": {"schedulingGates": [{"name": "g"}]}}, "default")
    assert caught.value.status == 422


def test_a_pod_spec_cannot_be_patched_to_a_node(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    with pytest.raises(ApiError) as caught:
        cluster.patch("pods", "a", {"spec": {"nodeName": "n1"}}, "default")
    assert caught.value.status == 422


def test_main_endpoint_ignores_status_and_status_endpoint_only_status(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    through_main = cluster.patch("pods", "a", {"status": {"phase": "Succeeded"}}, "default")
    assert through_main["status"]["phase"] == "Pending"
    through_status = cluster.patch_status(
        "pods", "a", {"status": {"phase": "Succeeded"}, "metadata": {"labels": {"x": "1"}}},
        "default")
    assert through_status["status"]["phase"] == "Succeeded"
    assert "labels" not in through_status["metadata"]


def test_patch_status_of_a_kind_without_status_is_not_found(cluster: FakeCluster) -> None:
    with pytest.raises(NotFound):
        cluster.patch_status("events", "x", {"status": {}}, "default")


def test_merge_patch_null_removes_a_key(cluster: FakeCluster) -> None:
    cluster.create("pods", {**pod("a"), "metadata": {"name": "a", "annotations": {"k": "v"}}},
                   "default")
    patched = cluster.patch("pods", "a", {"metadata": {"annotations": {"k": None, "n": "1"}}},
                            "default")
    assert patched["metadata"]["annotations"] == {"n": "1"}


def test_json_patch_applies_operations(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    patched = cluster.patch("pods", "a", [
        {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
        {"op": "add", "path": "/metadata/annotations/z", "value": "w"},
    ], "default", patch_type="json")
    assert patched["metadata"]["annotations"] == {"x": "y", "z": "w"}


def test_failed_json_patch_test_is_invalid(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    with pytest.raises(ApiError) as caught:
        cluster.patch("pods", "a", [{"op": "test", "path": "/metadata/name", "value": "b"}],
                      "default", patch_type="json")
    assert caught.value.status == 422


def test_merge_patch_with_a_stale_resource_version_is_a_conflict(cluster: FakeCluster) -> None:
    created = cluster.create("pods", pod("a"), "default")
    cluster.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
    with pytest.raises(Conflict):
        cluster.patch("pods", "a", {"metadata": {
            "resourceVersion": created["metadata"]["resourceVersion"], "labels": {"x": "2"}}},
            "default")


def test_a_patch_that_changes_nothing_keeps_the_version(cluster: FakeCluster) -> None:
    cluster.create("pods", {**pod("a"), "metadata": {"name": "a", "labels": {"x": "1"}}},
                   "default")
    before = cluster.resource_version
    same = cluster.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
    assert same["metadata"]["resourceVersion"] == before == cluster.resource_version


def test_replace_with_a_stale_resource_version_is_a_conflict(cluster: FakeCluster) -> None:
    lease = cluster.create("leases", {"metadata": {"name": "fluence"},
                                      "spec": {"holderIdentity": "a"}}, "default")
    lease["spec"]["holderIdentity"] = "b"
    cluster.replace("leases", lease)
    with pytest.raises(Conflict):
        cluster.replace("leases", lease)


def test_podgroup_is_stored_with_server_defaults(cluster: FakeCluster) -> None:
    created = cluster.create("podgroups", {**gang("g", 4), "status": {"conditions": []}},
                             "default")
    assert created["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert created["spec"]["disruptionMode"] == "Pod"
    assert names.PODGROUP_FINALIZER in created["metadata"]["finalizers"]
    assert "status" not in created


def test_podgroup_needs_exactly_one_policy(cluster: FakeCluster) -> None:
    body = {"metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}, "basic": {}}}}
    with pytest.raises(ApiError) as caught:
        cluster.create("podgroups", body, "default")
    assert caught.value.status == 422


def test_podgroup_policy_is_immutable_but_annotations_and_status_are_not(
        cluster: FakeCluster) -> None:
    cluster.create("podgroups", gang("g", 4), "default")
    with pytest.raises(ApiError):
        cluster.patch("podgroups", "g", {"spec": {"schedulingPolicy": {"gang": {"minCount": 5}}}},
                      "default")
    cluster.patch("podgroups", "g", {"metadata": {"annotations": {"a": "1"}}}, "default")
    condition = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}
    updated = cluster.patch_status("podgroups", "g", {"status": {"conditions": [condition]}},
                                   "default")
    assert updated["status"]["conditions"] == [condition]
    assert updated["metadata"]["annotations"] == {"a": "1"}


def test_delete_emits_deleted_and_reports_absence(cluster: FakeCluster) -> None:
    created = cluster.create("pods", pod("a"), "default")
    watch = cluster.watch("pods", resource_version=created["metadata"]["resourceVersion"],
                          timeout=0)
    assert cluster.delete("pods", "a", "default") is True
    assert cluster.delete("pods", "a", "default") is False
    assert [(t, o["metadata"]["name"]) for t, o in watch] == [(DELETED, "a")]


def test_watch_with_timeout_zero_drains_pending_events(cluster: FakeCluster) -> None:
    start = cluster.resource_version
    cluster.create("pods", pod("a"), "default")
    cluster.bind("default", "a", "n1")
    events = list(cluster.watch("pods", resource_version=start, timeout=0))
    assert [t for t, _ in events] == [ADDED, MODIFIED]
    assert events[1][1]["spec"]["nodeName"] == "n1"


def test_watch_without_version_starts_with_what_exists(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    watch = cluster.watch("pods", timeout=0)
    cluster.create("pods", pod("b"), "default")
    assert [(t, o["metadata"]["name"]) for t, o in watch] == [(ADDED, "a"), (ADDED, "b")]


def test_watch_start_is_fixed_when_called_not_when_iterated(cluster: FakeCluster) -> None:
    watch = cluster.watch("pods", timeout=0)
    cluster.create("pods", pod("late"), "default")
    assert [o["metadata"]["name"] for _, o in watch] == ["late"]


def test_filtered_watch_sees_objects_leave_and_enter(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    unbound = cluster.watch("pods", field_selector="spec.nodeName=", timeout=0)
    cluster.bind("default", "a", "n1")
    on_n1 = cluster.watch("pods", field_selector="spec.nodeName=n1", resource_version="1",
                          timeout=0)
    assert [(t, o["metadata"]["name"]) for t, o in unbound] == [(ADDED, "a"), (DELETED, "a")]
    assert [(t, o["metadata"]["name"]) for t, o in on_n1] == [(ADDED, "a")]


def test_watch_only_sees_its_resource(cluster: FakeCluster) -> None:
    start = cluster.resource_version
    cluster.create("nodes", make_node_dict("n1"))
    cluster.create("pods", pod("a"), "default")
    assert [o["kind"] for _, o in cluster.watch("nodes", resource_version=start, timeout=0)] == [
        "Node"]


def test_watch_from_compacted_history_resyncs_then_continues(cluster: FakeCluster) -> None:
    start = cluster.resource_version
    cluster.create("pods", pod("a"), "default")
    cluster.compact()
    watch = cluster.watch("pods", resource_version=start, timeout=0)
    kind, listing = next(watch)
    assert kind == RESYNC
    assert [p["metadata"]["name"] for p in listing["items"]] == ["a"]
    assert listing["metadata"]["resourceVersion"] == cluster.resource_version
    cluster.create("pods", pod("b"), "default")
    assert [(t, o["metadata"]["name"]) for t, o in watch] == [(ADDED, "b")]


def test_bounded_history_expires_old_versions(cluster: FakeCluster) -> None:
    small = FakeCluster(history=2)
    start = small.resource_version
    for name in "abc":
        small.create("pods", pod(name), "default")
    assert next(small.watch("pods", resource_version=start, timeout=0))[0] == RESYNC


def test_watch_waits_for_writes_from_another_thread(cluster: FakeCluster) -> None:
    watch = cluster.watch("pods", timeout=5)
    writer = threading.Timer(0.05, lambda: cluster.create("pods", pod("a"), "default"))
    writer.start()
    kind, obj = next(watch)
    writer.join()
    assert (kind, obj["metadata"]["name"]) == (ADDED, "a")


def _reading(events: Any) -> tuple[threading.Thread, list[Any]]:
    """A thread taking ``events`` until they end, and what it took."""
    seen: list[Any] = []
    reader = threading.Thread(target=lambda: seen.extend(events), daemon=True)
    reader.start()
    return reader, seen


def test_a_cancelled_watch_waiting_for_a_change_ends_at_once(cluster: FakeCluster) -> None:
    cancel = Cancellation()
    reader, seen = _reading(cluster.watch("pods", timeout=None, cancel=cancel))
    reader.join(0.1)
    assert reader.is_alive()  # waiting for a change that never comes
    cancel.cancel()
    reader.join(1.0)
    assert not reader.is_alive() and seen == []


def test_cancelling_one_watch_leaves_the_others_waiting(cluster: FakeCluster) -> None:
    cancel = Cancellation()
    ended, _ = _reading(cluster.watch("pods", timeout=None, cancel=cancel))
    other = cluster.watch("pods", timeout=5)
    cancel.cancel()
    ended.join(1.0)
    cluster.create("pods", pod("a"), "default")
    assert not ended.is_alive()
    assert next(other)[1]["metadata"]["name"] == "a"


def test_a_watch_cancelled_before_it_is_read_yields_nothing(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    cancel = Cancellation()
    watch = cluster.watch("pods", timeout=None, cancel=cancel)
    cancel.cancel()
    assert list(watch) == []


def test_post_event_records_an_event_about_the_object(cluster: FakeCluster) -> None:
    target = cluster.create("pods", pod("a"), "default")
    cluster.post_event(target, "Warning", "FailedScheduling", "0/4 nodes fit",
                       action="Scheduling")
    [event] = cluster.events(reason="FailedScheduling")
    assert event["involvedObject"]["uid"] == target["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "Pod"
    assert (event["type"], event["message"], event["action"]) == (
        "Warning", "0/4 nodes fit", "Scheduling")
    assert event["metadata"]["namespace"] == "default"
    assert cluster.events(involved_name="other") == []


def test_events_about_nodes_go_to_the_default_namespace(cluster: FakeCluster) -> None:
    target = cluster.create("nodes", make_node_dict("n1"))
    event = cluster.post_event(target, "Normal", "Cordoned", "n1 cordoned")
    assert event["metadata"]["namespace"] == "default"
    assert "namespace" not in event["involvedObject"]


def test_deleting_a_bound_pod_marks_it_terminating_first(cluster: FakeCluster) -> None:
    cluster.create("pods", pod("a"), "default")
    cluster.bind("default", "a", "n1")
    watch = cluster.watch("pods", resource_version=cluster.resource_version, timeout=0)
    cluster.delete("pods", "a", "default", grace_period_seconds=0)
    events = list(watch)
    assert [t for t, _ in events] == [MODIFIED, DELETED]
    assert events[0][1]["metadata"]["deletionTimestamp"]
