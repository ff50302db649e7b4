"""From a resources file to the devices of the driver's pools."""

from __future__ import annotations

import logging

from fluence_core.api import ResourceConfig, names
from fluence_core.testing import parse_resource_config
from fluence_dra_qpu.devices import (
    CLUSTER_POOL, FILE_DOMAIN, attribute_name, device_name, pools_of, typed_value,
)

from fluence_dra_qpu.testing import Records


def _config(text: str) -> ResourceConfig:
    return parse_resource_config(text, "test.yaml")


def test_every_vertex_of_the_braket_example_is_one_device_of_the_cluster_pool(
        braket_config: ResourceConfig) -> None:
    pools = pools_of(braket_config)
    assert list(pools) == [CLUSTER_POOL]
    pool = pools[CLUSTER_POOL]
    assert pool.node is None
    types = [d["attributes"]["type"]["string"] for d in pool.devices]
    assert types == ["qdevice", "qpu"] + ["qubit"] * 80


def test_a_device_carries_the_files_attributes_under_the_fluxion_domain(
        braket_config: ResourceConfig) -> None:
    qpu = pools_of(braket_config)[CLUSTER_POOL].devices[1]
    assert qpu["name"] == "rigetti-cepheus0-qpu0"
    assert qpu["attributes"] == {
        "type": {"string": "qpu"},
        "backend": {"string": "rigetti_cepheus"},
        "vertex": {"string": "/rigetti_cepheus0/qpu0"},
        f"{FILE_DOMAIN}/provider": {"string": "braket"},
        f"{FILE_DOMAIN}/region": {"string": "us-east-1"},
    }


def test_numbers_and_booleans_are_published_typed_for_cel() -> None:
    assert typed_value("80") == {"int": 80}
    assert typed_value("true") == {"bool": True}
    assert typed_value("us-east-1") == {"string": "us-east-1"}


def test_a_key_with_dashes_or_dots_is_published_with_underscores() -> None:
    assert attribute_name("max-shots") == "max_shots"
    assert attribute_name("vendor.tier") == "vendor_tier"


def test_a_key_kubernetes_would_refuse_is_left_out_with_a_warning(records: Records) -> None:
    config = _config("resources:\n  - type: qpu\n    attributes:\n"
                     "      9lives: x\n      region: eu\n")
    device = pools_of(config)[CLUSTER_POOL].devices[0]
    assert f"{FILE_DOMAIN}/region" in device["attributes"]
    assert not [k for k in device["attributes"] if "9lives" in k]
    assert any("'9lives' is not published" in m for m in records.at(logging.WARNING))


def test_a_string_value_over_64_characters_is_left_out_with_a_warning(
        records: Records) -> None:
    config = _config(f"resources:\n  - type: qpu\n    attributes: {{note: {'x' * 65}}}\n")
    device = pools_of(config)[CLUSTER_POOL].devices[0]
    assert f"{FILE_DOMAIN}/note" not in device["attributes"]
    assert any("longer than 64" in m for m in records.at(logging.WARNING))


def test_an_entry_under_a_node_is_published_in_that_nodes_pool() -> None:
    config = _config("resources:\n  - type: qpu\n  - type: qpu\n    name: local\n"
                     "    parent: node-a\n")
    pools = pools_of(config)
    assert sorted(pools) == [CLUSTER_POOL, "node-a"]
    assert pools["node-a"].node == "node-a"
    assert [d["name"] for d in pools["node-a"].devices] == ["local0"]


def test_counts_make_one_device_per_instance_with_distinct_names() -> None:
    config = _config("resources:\n  - type: qpu\n    count: 3\n")
    devices = pools_of(config)[CLUSTER_POOL].devices
    assert [d["name"] for d in devices] == ["qpu0", "qpu1", "qpu2"]


def test_two_paths_that_read_alike_get_distinct_device_names() -> None:
    taken: set[str] = set()
    first = device_name("/rigetti_cepheus0", taken)
    second = device_name("/rigetti-cepheus0", taken)
    assert first == "rigetti-cepheus0"
    assert second != first and second.startswith("rigetti-cepheus0-")
    assert len(second) <= 63


def test_a_path_too_long_for_a_dns_label_gets_a_hashed_name() -> None:
    name = device_name("/" + "a" * 70 + "0", set())
    assert len(name) <= 63
    assert name.startswith("a" * 40 + "-")


def test_the_driver_name_is_the_device_class_a_claim_names() -> None:
    assert names.QPU_DRA_DRIVER == "qpu.fluxion.flux-framework.org"
    assert names.QPU_DEVICE_CLASS == names.QPU_DRA_DRIVER
