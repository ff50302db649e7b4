"""A pod's claims on one node: kube-scheduler's search, constraints and modes."""

from __future__ import annotations

from typing import Any

from fluence_core.dra.allocator import allocate
from fluence_core.dra.claims import DeviceClass, read_claim
from fluence_core.dra.devices import Device, read_devices
from fluence_core.testing import make_device, make_device_request, make_resource_claim_dict

DRIVER = "gpu.example.com"
CLASSES = {"gpu": DeviceClass("gpu", (f'device.driver == "{DRIVER}"',), ()),
           "t4": DeviceClass("t4", (f'device.attributes["{DRIVER}"].model == "t4"',), ())}


def _devices(*specs: tuple[str, dict[str, Any]]) -> list[Device]:
    from fluence_core.testing import make_resource_slice_dict
    return read_devices(make_resource_slice_dict(
        "s", DRIVER, [make_device(name, attributes) for name, attributes in specs], node="n1"))


def _gpus(count: int, **attributes: Any) -> list[Device]:
    return _devices(*((f"g{i}", {"model": "a100", "numa": i % 2, **attributes})
                      for i in range(count)))


def _claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> Any:
    return read_claim(make_resource_claim_dict("c", list(requests),
                                               constraints=constraints or []))


def _picked(found: Any) -> list[tuple[str, str]]:
    assert not isinstance(found, str), found
    return [(p.request, p.device.id.device) for p in found]


def test_exact_count_takes_that_many_free_devices() -> None:
    found = allocate([_claim(make_device_request("r", "gpu", 2))], _gpus(4), CLASSES,
                     lambda d: d.id.device != "g0")
    assert _picked(found) == [("r", "g1"), ("r", "g2")]


def test_too_few_free_devices_is_a_reason_naming_the_request() -> None:
    found = allocate([_claim(make_device_request("r", "gpu", 3))], _gpus(2), CLASSES,
                     lambda d: True)
    assert isinstance(found, str) and "request 'r' wants 3" in found


def test_all_takes_every_matching_device() -> None:
    found = allocate([_claim(make_device_request("r", "gpu", mode="All"))], _gpus(3), CLASSES,
                     lambda d: True)
    assert len(_picked(found)) == 3


def test_all_fails_when_one_matching_device_is_taken() -> None:
    found = allocate([_claim(make_device_request("r", "gpu", mode="All"))], _gpus(3), CLASSES,
                     lambda d: d.id.device != "g1")
    assert isinstance(found, str)


def test_match_attribute_keeps_the_devices_on_one_value() -> None:
    claim = _claim(make_device_request("r", "gpu", 2),
                   constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    found = allocate([claim], _gpus(4), CLASSES, lambda d: d.id.device != "g0")
    assert _picked(found) == [("r", "g1"), ("r", "g3")]


def test_match_attribute_backtracks_across_requests() -> None:
    claim = _claim(make_device_request("a", "gpu"), make_device_request("b", "gpu", 2),
                   constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    devices = _devices(("g0", {"numa": 0}), ("g1", {"numa": 1}), ("g2", {"numa": 1}),
                       ("g3", {"numa": 1}))
    found = allocate([claim], devices, CLASSES, lambda d: True)
    assert _picked(found) == [("a", "g1"), ("b", "g2"), ("b", "g3")]


def test_first_available_falls_back_to_the_next_sub_request() -> None:
    claim = _claim({"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "count": 3},
        {"name": "small", "deviceClassName": "gpu", "count": 1}]})
    found = allocate([claim], _gpus(2), CLASSES, lambda d: True)
    assert _picked(found) == [("r/small", "g0")]


def test_a_class_selector_narrows_the_candidates() -> None:
    devices = _devices(("g0", {"model": "a100"}), ("g1", {"model": "t4"}))
    found = allocate([_claim(make_device_request("r", "t4"))], devices, CLASSES, lambda d: True)
    assert _picked(found) == [("r", "g1")]


def test_an_unknown_class_is_a_reason() -> None:
    found = allocate([_claim(make_device_request("r", "fpga"))], _gpus(1), CLASSES,
                     lambda d: True)
    assert isinstance(found, str) and "DeviceClass 'fpga' does not exist" in found


def test_a_cel_error_is_a_reason_not_a_crash() -> None:
    claim = _claim(make_device_request("r", "gpu", 1, f'device.attributes["{DRIVER}"].nope'))
    found = allocate([claim], _gpus(1), CLASSES, lambda d: True)
    assert isinstance(found, str) and "Key not found" in found


def test_two_claims_never_share_a_device() -> None:
    claims = [_claim(make_device_request("r", "gpu")), _claim(make_device_request("r", "gpu"))]
    found = allocate(claims, _gpus(2), CLASSES, lambda d: True)
    assert sorted(d for _, d in _picked(found)) == ["g0", "g1"]
