"""fluence_core.kube.meta: an object's metadata, read one way."""

from __future__ import annotations

from typing import Any

from fluence_core.kube.meta import (
    annotations_of,
    controller_reference,
    job_controller_reference,
    labels_of,
    metadata_of,
    owner_references_of,
    writable_metadata,
)

JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "vqe", "uid": "u-1",
       "controller": True}


def pod(**metadata: Any) -> dict[str, Any]:
    return {"metadata": metadata}


def test_an_object_without_metadata_reads_as_empty_everywhere() -> None:
    for obj in ({}, {"metadata": None}):
        assert metadata_of(obj) == {}
        assert labels_of(obj) == {}
        assert annotations_of(obj) == {}
        assert owner_references_of(obj) == []
        assert controller_reference(obj) is None


def test_labels_annotations_and_owners_are_the_objects_own() -> None:
    obj = pod(labels={"a": "1"}, annotations={"b": "2"}, ownerReferences=[JOB])
    assert labels_of(obj) == {"a": "1"}
    assert annotations_of(obj) == {"b": "2"}
    assert owner_references_of(obj) == [JOB]


def test_the_controller_is_the_reference_marked_controller_with_a_uid_and_a_name() -> None:
    owner = {**JOB, "controller": False}
    assert controller_reference(pod(ownerReferences=[owner, JOB])) == JOB
    assert controller_reference(pod(ownerReferences=[owner])) is None
    assert controller_reference(pod(ownerReferences=[{**JOB, "uid": ""}])) is None
    assert controller_reference(pod(ownerReferences=[{**JOB, "name": None}])) is None


def test_malformed_owner_references_name_no_controller() -> None:
    assert controller_reference(pod(ownerReferences={"controller": True})) is None
    assert controller_reference(pod(ownerReferences=["controller"])) is None


def test_only_a_batch_job_is_a_controlling_job() -> None:
    assert job_controller_reference(pod(ownerReferences=[JOB])) == JOB
    other_group = {**JOB, "apiVersion": "example.com/v1"}
    assert job_controller_reference(pod(ownerReferences=[other_group])) is None
    replica_set = {**JOB, "apiVersion": "apps/v1", "kind": "ReplicaSet"}
    assert job_controller_reference(pod(ownerReferences=[replica_set])) is None


def test_metadata_written_through_writable_metadata_stays_on_the_object() -> None:
    for obj in ({}, {"metadata": None}, pod(name="p")):
        writable_metadata(obj)["namespace"] = "ns"
        assert metadata_of(obj)["namespace"] == "ns"
    kept = pod(name="p")
    assert writable_metadata(kept) is kept["metadata"]
