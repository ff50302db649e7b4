"""Which devices are taken: every claim's allocation, and Fluence's unseen commits."""

from __future__ import annotations

from typing import Any

from fluence_core.dra.devices import DeviceId
from fluence_core.dra.state import DraState
from fluence_core.kube.api import ADDED, DELETED, MODIFIED
from fluence_core.testing import make_device_request, make_resource_claim_dict

GPU0 = DeviceId("gpu.example.com", "n1", "gpu0")


def _allocation(device: DeviceId = GPU0) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "r", "driver": device.driver,
                                     "pool": device.pool, "device": device.device}]}}


def _claim(name: str, allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    body = make_resource_claim_dict(name, [make_device_request("r", "gpu")])
    body["metadata"]["resourceVersion"] = "1"
    if allocation is not None:
        body["status"] = {"allocation": allocation}
    return body


def test_a_device_named_by_any_claims_allocation_is_taken() -> None:
    state = DraState()
    state.replace("resourceclaims", [_claim("theirs", _allocation())])
    assert state.taken() == {GPU0: ("default", "theirs")}


def test_a_claim_released_frees_its_devices() -> None:
    state = DraState()
    state.replace("resourceclaims", [_claim("c", _allocation())])
    state.handle("resourceclaims", MODIFIED, _claim("c"))
    assert state.taken() == {}


def test_an_assumed_allocation_is_taken_until_the_watch_shows_it() -> None:
    state = DraState()
    state.handle("resourceclaims", ADDED, _claim("c"))
    state.assume(("default", "c"), _allocation())
    assert GPU0 in state.taken()
    state.handle("resourceclaims", MODIFIED, _claim("c"))  # an older write, seen late
    assert GPU0 in state.taken()
    state.handle("resourceclaims", MODIFIED, _claim("c", _allocation()))
    assert state.assumed == {} and GPU0 in state.taken()


def test_a_deleted_claim_drops_its_assumption() -> None:
    state = DraState()
    state.handle("resourceclaims", ADDED, _claim("c"))
    state.assume(("default", "c"), _allocation())
    state.handle("resourceclaims", DELETED, _claim("c"))
    assert state.taken() == {}


def test_an_out_of_scope_claim_reads_as_its_reason() -> None:
    state = DraState()
    body = make_resource_claim_dict("c", [make_device_request("r", "gpu", adminAccess=True)])
    state.handle("resourceclaims", ADDED, body)
    found = state.claim("default", "c")
    assert isinstance(found, ValueError) and "adminAccess" in str(found)


GPU1 = DeviceId("gpu.example.com", "n1", "gpu1")


def _reserved(name: str, device: DeviceId, *uids: str) -> dict[str, Any]:
    body = _claim(name, _allocation(device))
    body["status"]["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in uids]
    return body


def test_only_claims_reserved_for_leaving_pods_alone_are_freed() -> None:
    state = DraState()
    state.replace("resourceclaims", [_reserved("alone", GPU0, "v1"),
                                     _reserved("shared", GPU1, "v1", "stays")])
    assert state.freed_by(["v1"]) == {("default", "alone")}
    assert state.freed_by(["v1", "stays"]) == {("default", "alone"), ("default", "shared")}
    assert state.freed_by(["other"]) == frozenset()
    state.freeing(state.freed_by(["v1"]))
    assert state.taken() == {GPU1: ("default", "shared")}
    state.freeing(frozenset())
    assert set(state.taken()) == {GPU0, GPU1}


def test_a_held_device_stays_taken_after_its_claim_is_deallocated_until_unheld() -> None:
    state = DraState()
    state.replace("resourceclaims", [_reserved("victim", GPU0, "v1")])
    state.hold("default/high", frozenset({GPU0}))
    assert state.still_claimed([GPU0]) == {GPU0: ("default", "victim")}
    state.handle("resourceclaims", MODIFIED, _claim("victim"))  # the controller deallocates
    assert state.still_claimed([GPU0]) == {} and GPU0 in state.taken()
    assert state.unhold("default/high") == {GPU0}
    assert state.taken() == {}
