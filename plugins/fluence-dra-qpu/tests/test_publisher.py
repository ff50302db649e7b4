"""The driver's slices: published, left alone, replaced at generation + 1, deleted."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from fluence_core.api import RESOURCE_SLICES, ApiError, ResourceConfig, names
from fluence_core.testing import (
    FakeCluster, make_device, make_resource_slice_dict, parse_resource_config,
)
from fluence_dra_qpu.publisher import SlicePublisher
from fluence_dra_qpu.testing import Records

DRIVER = names.QPU_DRA_DRIVER


def _config(text: str) -> ResourceConfig:
    return parse_resource_config(text, "test.yaml")


def _slices(kube: FakeCluster) -> list[dict[str, Any]]:
    return list(kube.list(RESOURCE_SLICES).items)


def _pool_view(kube: FakeCluster) -> list[tuple[str, int, int]]:
    """(pool, generation, resourceSliceCount) of every slice."""
    return sorted((s["spec"]["pool"]["name"], s["spec"]["pool"]["generation"],
                   s["spec"]["pool"]["resourceSliceCount"]) for s in _slices(kube))


def test_the_first_pass_publishes_the_cluster_pool_on_all_nodes(
        fake_cluster: FakeCluster, braket_config: ResourceConfig) -> None:
    result = SlicePublisher(fake_cluster).publish(braket_config)
    assert result.published == {"cluster": 1}
    [published] = _slices(fake_cluster)
    assert published["spec"]["driver"] == DRIVER
    assert published["spec"]["allNodes"] is True
    assert "nodeName" not in published["spec"]
    assert published["spec"]["pool"] == {"name": "cluster", "generation": 1,
                                         "resourceSliceCount": 1}
    assert len(published["spec"]["devices"]) == 82
    assert published["metadata"]["labels"] == {names.MANAGED_BY_LABEL: names.QPU_DRIVER_MANAGER}


def test_a_second_pass_over_the_same_file_writes_nothing(
        fake_cluster: FakeCluster, braket_config: ResourceConfig) -> None:
    publisher = SlicePublisher(fake_cluster)
    publisher.publish(braket_config)
    version = fake_cluster.resource_version
    result = publisher.publish(braket_config)
    assert result.published == {} and list(result.removed) == []
    assert fake_cluster.resource_version == version


def test_a_restarted_driver_keeps_the_generation_of_an_unchanged_file(
        fake_cluster: FakeCluster, braket_config: ResourceConfig) -> None:
    SlicePublisher(fake_cluster).publish(braket_config)
    assert SlicePublisher(fake_cluster).publish(braket_config).published == {}
    assert _pool_view(fake_cluster) == [("cluster", 1, 1)]


def test_a_changed_file_is_published_at_the_next_generation_and_the_old_slices_go(
        fake_cluster: FakeCluster, braket_config: ResourceConfig) -> None:
    publisher = SlicePublisher(fake_cluster)
    publisher.publish(braket_config)
    changed = _config("resources:\n  - type: qpu\n    attributes: {region: eu-west-2}\n")
    assert publisher.publish(changed).published == {"cluster": 2}
    [published] = _slices(fake_cluster)
    assert published["spec"]["pool"]["generation"] == 2
    assert [d["name"] for d in published["spec"]["devices"]] == ["qpu0"]


def test_a_pool_whose_every_slice_was_deleted_is_published_again(
        fake_cluster: FakeCluster, braket_config: ResourceConfig) -> None:
    publisher = SlicePublisher(fake_cluster)
    publisher.publish(braket_config)
    fake_cluster.delete(RESOURCE_SLICES, _slices(fake_cluster)[0]["metadata"]["name"])
    assert publisher.publish(braket_config).published == {"cluster": 1}
    assert _pool_view(fake_cluster) == [("cluster", 1, 1)]


def test_a_pool_of_more_than_128_devices_spans_slices_that_count_each_other(
        fake_cluster: FakeCluster) -> None:
    config = _config("resources:\n  - type: qpu\n    count: 200\n")
    SlicePublisher(fake_cluster).publish(config)
    assert _pool_view(fake_cluster) == [("cluster", 1, 2), ("cluster", 1, 2)]
    assert sum(len(s["spec"]["devices"]) for s in _slices(fake_cluster)) == 200


def test_a_missing_slice_of_a_pool_of_two_brings_the_whole_pool_anew(
        fake_cluster: FakeCluster) -> None:
    config = _config("resources:\n  - type: qpu\n    count: 200\n")
    publisher = SlicePublisher(fake_cluster)
    publisher.publish(config)
    fake_cluster.delete(RESOURCE_SLICES, _slices(fake_cluster)[1]["metadata"]["name"])
    assert publisher.publish(config).published == {"cluster": 2}
    assert _pool_view(fake_cluster) == [("cluster", 2, 2), ("cluster", 2, 2)]


def test_a_node_entry_is_published_node_local_and_removed_with_the_entry(
        fake_cluster: FakeCluster) -> None:
    publisher = SlicePublisher(fake_cluster)
    publisher.publish(_config("resources:\n  - type: qpu\n  - type: qpu\n    name: local\n"
                              "    parent: node-a\n"))
    local = [s for s in _slices(fake_cluster) if s["spec"]["pool"]["name"] == "node-a"]
    assert [s["spec"].get("nodeName") for s in local] == ["node-a"]
    assert "allNodes" not in local[0]["spec"]
    result = publisher.publish(_config("resources:\n  - type: qpu\n"))
    assert list(result.removed) == ["node-a"]
    assert _pool_view(fake_cluster) == [("cluster", 1, 1)]


def test_another_drivers_slices_are_left_alone(
        fake_cluster: FakeCluster, braket_config: ResourceConfig) -> None:
    other = make_resource_slice_dict("gpus", "gpu.example.com", [make_device("gpu0")],
                                     node="node-a")
    fake_cluster.create(RESOURCE_SLICES, other)
    SlicePublisher(fake_cluster).publish(braket_config)
    SlicePublisher(fake_cluster).publish(_config("resources:\n  - type: qpu\n"))
    assert fake_cluster.get(RESOURCE_SLICES, "gpus") is not None


class _FailingCreate(FakeCluster):
    """Refuses the ``fail_at``-th create (counted from 1), as a lost connection would."""

    def __init__(self, fail_at: int) -> None:
        self.creates, self.fail_at = 0, fail_at
        super().__init__()
        self.creates = 0  # the cluster's own objects (its namespaces) are not counted

    def create(self, resource: Any, body: Any, namespace: str | None = None,
               **more: Any) -> Any:
        self.creates += 1
        if self.creates == self.fail_at and resource == RESOURCE_SLICES:
            raise ApiError(503, "the API server is going away")
        return super().create(resource, body, namespace, **more)


def test_a_pool_half_written_when_the_api_failed_is_written_whole_at_the_next_generation(
        ) -> None:
    kube = _FailingCreate(fail_at=2)
    publisher = SlicePublisher(kube)
    config = _config("resources:\n  - type: qpu\n    count: 200\n")
    with pytest.raises(ApiError):
        publisher.publish(config)
    assert _pool_view(kube) == [("cluster", 1, 2)]  # one of two: never offered
    assert publisher.publish(config).published == {"cluster": 2}
    assert _pool_view(kube) == [("cluster", 2, 2), ("cluster", 2, 2)]


def test_what_a_file_leaves_out_is_logged_once_not_every_pass(
        fake_cluster: FakeCluster, records: Records) -> None:
    publisher = SlicePublisher(fake_cluster)
    config = _config("resources:\n  - type: qpu\n    attributes: {9lives: x}\n")
    for _ in range(3):
        publisher.publish(config)
    assert len([m for m in records.at(logging.WARNING) if "9lives" in m]) == 1
