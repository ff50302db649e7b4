"""A node's verdict for claims alike is kept until a device it reaches is taken or let go."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core.dra import plan as plan_module
from fluence_core.dra.plan import DevicePlan, plan_group
from fluence_core.dra.state import DraState
from fluence_core.kube.api import MODIFIED
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request, make_node_dict,
    make_pod_dict, make_resource_claim_dict, make_resource_slice_dict,
)

DRIVER = "gpu.example.com"
NODES = {name: make_node_dict(name) for name in ("n1", "n2")}


def _claim(name: str, device: str | None = None, version: str = "1") -> dict[str, Any]:
    body = make_resource_claim_dict(name, [make_device_request("r", "gpu")])
    body["metadata"].update(resourceVersion=version, uid=f"uid-{name}")
    if device is not None:
        body["status"] = {"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": device.split("/")[0],
             "device": device.split("/")[1]}]}}}
    return body


def _state() -> DraState:
    """n1 and n2 with one device each; n1's is held by the claim ``holder``."""
    state = DraState()
    state.replace("resourceslices", [
        make_resource_slice_dict(f"{n}-gpus", DRIVER, [make_device("gpu0")], node=n)
        for n in NODES])
    state.replace("deviceclasses", [make_device_class_dict("gpu", f'device.driver == "{DRIVER}"')])
    state.replace("resourceclaims", [_claim("holder", "n1/gpu0"), _claim("a"), _claim("b")])
    return state


def _plan(state: DraState, claim: str) -> DevicePlan:
    pod = make_pod_dict(f"pod-{claim}", "100m", resourceClaims=claim_entries(gpu=claim))
    found = plan_group(state, [pod], NODES)
    assert isinstance(found, DevicePlan)
    return found


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The nodes the allocator searched, in order."""
    seen: list[str] = []
    real = plan_module.allocate

    def counted(claims: Any, reachable: Any, *rest: Any) -> Any:
        seen.append(reachable[0].node if reachable else "")
        return real(claims, reachable, *rest)
    monkeypatch.setattr(plan_module, "allocate", counted)
    return seen


def test_a_full_node_is_refused_to_claims_alike_without_a_second_search(
        searches: list[str]) -> None:
    state = _state()
    first, second = _plan(state, "a"), _plan(state, "b")
    assert not first.fits(0, "n1") and not second.fits(0, "n1")
    assert searches == ["n1"]
    assert "default/b" in second.why(0, 1) and "default/a" not in second.why(0, 1)


def test_a_node_fitting_is_known_too_and_its_devices_picked_when_taken(
        searches: list[str]) -> None:
    state = _state()
    assert _plan(state, "a").fits(0, "n2")
    chosen = _plan(state, "b")
    assert chosen.fits(0, "n2")
    chosen.take(0, "n2")
    assert searches == ["n2", "n2"]  # the fit known; the take picks its device
    assert chosen.tentative[("default", "b")]["devices"]["results"][0]["pool"] == "n2"


def test_a_device_let_go_on_the_node_makes_it_searched_again(searches: list[str]) -> None:
    state = _state()
    assert not _plan(state, "a").fits(0, "n1")
    state.handle("resourceclaims", MODIFIED, _claim("holder", None, version="2"))
    assert _plan(state, "b").fits(0, "n1")
    assert searches == ["n1", "n1"]


def test_a_device_taken_elsewhere_leaves_the_verdict_standing(searches: list[str]) -> None:
    state = _state()
    assert not _plan(state, "a").fits(0, "n1")
    state.assume(("default", "a"), {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "n2", "device": "gpu0"}]}})
    assert not _plan(state, "b").fits(0, "n1")
    assert not _plan(state, "b").fits(0, "n2")
    assert searches == ["n1", "n2"]


def test_a_device_taken_on_the_node_overturns_its_fit(searches: list[str]) -> None:
    state = _state()
    assert _plan(state, "a").fits(0, "n2")
    state.assume(("default", "a"), {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "n2", "device": "gpu0"}]}})
    assert not _plan(state, "b").fits(0, "n2")
    assert searches == ["n2", "n2"]
