"""Devices read from ResourceSlices: pools by newest generation, complete pools only."""

from __future__ import annotations

import pytest

from fluence_core.dra.devices import Inventory, read_devices
from fluence_core.testing import make_device, make_resource_slice_dict

DRIVER = "gpu.example.com"


def _slice(name: str, *devices: str, generation: int = 1, count: int = 1,
           pool: str = "p") -> dict[str, object]:
    body = make_resource_slice_dict(name, DRIVER, [make_device(d) for d in devices], node="n1",
                                    pool=pool, generation=generation, slice_count=count)
    body["metadata"]["resourceVersion"] = "1"
    return body


def _names(inventory: Inventory) -> list[str]:
    return [d.id.device for d in inventory.devices()]


def test_an_unqualified_attribute_belongs_to_the_drivers_domain() -> None:
    device, = read_devices(make_resource_slice_dict(
        "s", DRIVER, [make_device("g0", {"model": "a100", "numa.example.com/zone": 1})],
        node="n1"))
    assert device.attributes == {DRIVER: {"model": "a100"}, "numa.example.com": {"zone": 1}}


def test_capacity_is_an_exact_quantity() -> None:
    device, = read_devices(make_resource_slice_dict(
        "s", DRIVER, [make_device("g0", capacity={"memory": "40Gi"})], node="n1"))
    assert device.capacity == {DRIVER: {"memory": 40 * 2**30}}


def test_a_node_local_device_is_reachable_from_its_node_only() -> None:
    device, = read_devices(_slice("s", "g0"))
    assert device.reachable_from("n1", {}) and not device.reachable_from("n2", {})


def test_a_network_device_is_reachable_from_the_nodes_its_selector_picks() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    device, = read_devices(make_resource_slice_dict("s", DRIVER, [make_device("q0")],
                                                    node_selector=selector))
    assert device.network_attached
    assert device.reachable_from("n1", {"rack": "r1"})
    assert not device.reachable_from("n2", {"rack": "r2"})


def test_an_all_nodes_device_is_reachable_from_every_node() -> None:
    device, = read_devices(make_resource_slice_dict("s", DRIVER, [make_device("q0")]))
    assert device.reachable_from("anything", {})


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    inventory = Inventory()
    inventory.replace([_slice("old", "g0", generation=1), _slice("new", "g1", generation=2)])
    assert _names(inventory) == ["g1"]


def test_an_incomplete_pool_offers_no_device() -> None:
    inventory = Inventory()
    inventory.replace([_slice("half", "g0", count=2)])
    assert _names(inventory) == []
    assert not inventory.pools[(DRIVER, "p")].complete


def test_a_pool_is_complete_once_all_its_slices_are_seen() -> None:
    inventory = Inventory()
    inventory.replace([_slice("a", "g0", count=2)])
    inventory.put(_slice("b", "g1", count=2))
    assert _names(inventory) == ["g0", "g1"]


def test_a_device_with_binding_conditions_is_kept_but_not_offered() -> None:
    device, = read_devices(make_resource_slice_dict(
        "s", DRIVER, [make_device("g0", bindingConditions=["ready"])], node="n1"))
    assert device.unsupported == "it has binding conditions"


def test_a_malformed_attribute_names_the_slice_and_the_device() -> None:
    body = make_resource_slice_dict("s", DRIVER, [make_device("g0")], node="n1")
    body["spec"]["devices"][0]["attributes"] = {"model": {"string": 3}}
    with pytest.raises(ValueError, match=r"ResourceSlice s: spec.devices\[0\].attributes"):
        read_devices(body)


def test_a_malformed_slice_is_left_out_and_the_others_count() -> None:
    bad = _slice("bad", "x", pool="q")
    bad["spec"]["devices"][0]["capacity"] = {"memory": {"value": "lots"}}
    inventory = Inventory()
    inventory.replace([bad, _slice("good", "g0")])
    assert _names(inventory) == ["g0"]


def test_a_slice_whose_pool_is_garbled_is_left_out() -> None:
    bad = _slice("bad", "x", pool="q")
    bad["spec"]["pool"] = "not a pool"
    inventory = Inventory()
    inventory.replace([bad, _slice("good", "g0")])
    assert _names(inventory) == ["g0"]
