"""A gang's claims matched with its cores in one search, where greed misses a fit."""

from __future__ import annotations

from typing import Any, Callable

from fluence_core.kube.api import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request,
    make_resource_claim_dict, make_resource_slice_dict,
)
from tests.scheduler.conftest import Harness, node, pod, pod_group

Factory = Callable[..., Harness]
DRIVER = "gpu.example.com"
A100 = f'device.attributes["{DRIVER}"].model == "a100"'
ZONE = "topology.kubernetes.io/zone"


def _gpus(h: Harness, node_name: str, *models: str) -> None:
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        f"{node_name}-gpus", DRIVER,
        [make_device(f"gpu{i}", {"model": m}) for i, m in enumerate(models)], node=node_name))


def _class(h: Harness) -> None:
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict(
        "gpu", f'device.driver == "{DRIVER}"'))


def _claim(h: Harness, name: str, count: int = 1, *selectors: str) -> None:
    h.cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
        name, [make_device_request("r", "gpu", count, *selectors)]))


def _member(name: str, claim: str, cpu: str = "1") -> dict[str, Any]:
    return pod(name, cpu, group="g", resourceClaims=claim_entries(gpu=claim))


def _devices_of(h: Harness, claim: str) -> list[str]:
    found = h.cluster.get(RESOURCE_CLAIMS, claim, "default") or {}
    allocation = (found.get("status") or {}).get("allocation") or {}
    return [f"{r['pool']}/{r['device']}" for r in allocation.get("devices", {}).get("results", [])]


def test_members_of_different_shapes_find_the_fit_greed_misses(
        harness_factory: Factory) -> None:
    """m0 asks for any GPU, m1 for an a100 and more cores. Member by member, m0 takes the
    first node, a, and its only GPU, the a100: m1 then fits nowhere. Matched jointly, m1
    goes to a and m0 to b."""
    h = harness_factory(node("a", 4), node("b", 4))
    _class(h)
    _gpus(h, "a", "a100")
    _gpus(h, "b", "t4")
    _claim(h, "any")
    _claim(h, "big", 1, A100)
    h.add(pod_group("g", 2))
    h.add(_member("m0", "any"))
    h.add(_member("m1", "big", cpu="2"))
    h.cycle()
    assert (h.node_of("m0"), h.node_of("m1")) == ("b", "a")
    assert (_devices_of(h, "any"), _devices_of(h, "big")) == (["b/gpu0"], ["a/gpu0"])


def test_a_gang_in_one_zone_takes_the_zone_where_all_its_devices_are(
        harness_factory: Factory) -> None:
    """Zone a has room for the cores, and for m0's devices, but not for m1's: the match
    holds the whole gang in zone b, each claim allocated on its member's node."""
    zones = {"a0": "a", "a1": "a", "b0": "b", "b1": "b"}
    h = harness_factory(*(node(n, 8, zone=z) for n, z in zones.items()),
                        resources=f"topology:\n  levels: [{ZONE}]\n")
    _class(h)
    _gpus(h, "a0", "t4", "t4")
    _gpus(h, "b0", "t4", "t4")
    _gpus(h, "b1", "a100")
    _claim(h, "two", 2)
    _claim(h, "big", 1, A100)
    h.add(pod_group("g", 2, topology=[ZONE]))
    h.add(_member("m0", "two"))
    h.add(_member("m1", "big", cpu="2"))
    h.cycle()
    assert (h.node_of("m0"), h.node_of("m1")) == ("b0", "b1")
    assert _devices_of(h, "two") == ["b0/gpu0", "b0/gpu1"]
    assert _devices_of(h, "big") == ["b1/gpu0"]


def test_a_network_device_is_not_given_to_two_members(harness_factory: Factory) -> None:
    """One device every node reaches and two members asking for it: the match holds it
    for one only, so the gang waits whole."""
    h = harness_factory(node("a", 4), node("b", 4))
    _class(h)
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "shared", DRIVER, [make_device("gpu0", {"model": "a100"})], pool="net"))
    _claim(h, "c0")
    _claim(h, "c1")
    h.add(pod_group("g", 2))
    h.add(_member("m0", "c0"))
    h.add(_member("m1", "c1", cpu="2"))
    h.cycle()
    assert (h.node_of("m0"), h.node_of("m1")) == (None, None)
    assert (_devices_of(h, "c0"), _devices_of(h, "c1")) == ([], [])


def test_shared_cpu_members_are_still_placed_member_by_member(
        harness_factory: Factory) -> None:
    """Members drawing from the shared CPU pool keep the member-by-member placement, each
    on a node where its claims fit."""
    h = harness_factory(node("a", 4), node("b", 4))
    _class(h)
    _gpus(h, "a", "t4")
    _gpus(h, "b", "t4")
    _claim(h, "c0")
    _claim(h, "c1")
    h.add(pod_group("g", 2))
    h.add(_member("m0", "c0", cpu="500m"))
    h.add(_member("m1", "c1", cpu="500m"))
    h.cycle()
    assert sorted([h.node_of("m0") or "", h.node_of("m1") or ""]) == ["a", "b"]
    assert sorted(_devices_of(h, "c0") + _devices_of(h, "c1")) == ["a/gpu0", "b/gpu0"]


def test_a_claim_allocated_before_pins_its_member_inside_the_joint_match(
        harness_factory: Factory) -> None:
    """m0's claim was allocated on b before (by another scheduler): the match puts m0 on b,
    only reserves that claim for it, and gives m1 a device of its own."""
    h = harness_factory(node("a", 4), node("b", 4))
    _class(h)
    _gpus(h, "a", "t4")
    _gpus(h, "b", "t4", "t4")
    _claim(h, "pre")
    on_b = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}
    h.cluster.patch_status(RESOURCE_CLAIMS, "pre", {"status": {"allocation": {
        "devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "b",
                                 "device": "gpu1"}]}, "nodeSelector": on_b}}}, "default")
    _claim(h, "new")
    h.add(pod_group("g", 2))
    h.add(_member("m0", "pre"))
    h.add(_member("m1", "new", cpu="2"))
    h.cycle()
    assert h.node_of("m0") == "b"
    assert _devices_of(h, "pre") == ["b/gpu1"]
    assert _devices_of(h, "new") in (["a/gpu0"], ["b/gpu0"])
    assert _devices_of(h, "new") == [f"{h.node_of('m1')}/gpu0"]
