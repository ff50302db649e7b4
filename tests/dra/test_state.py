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
