"""Selectors over a device, with Kubernetes' variable, quantities and versions."""

from __future__ import annotations

import pytest

from fluence_core.dra.cel import SelectorError, compile_selector, matches
from fluence_core.dra.devices import Device, read_devices
from fluence_core.testing import make_device, make_resource_slice_dict

DRIVER = "gpu.example.com"


def _device(**more: object) -> Device:
    device, = read_devices(make_resource_slice_dict("s", DRIVER, [make_device(
        "g0", {"model": "a100", "numa": 1, "other.example.com/fast": True},
        {"memory": "40Gi"}, **more)], node="n1"))
    return device


@pytest.mark.parametrize("expression", [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "a100"',
    'device.attributes["gpu.example.com"].numa >= 1',
    'device.attributes["other.example.com"].fast',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) > 0',
    'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("39Gi"))',
    'device.capacity["gpu.example.com"].memory.asInteger() == 42949672960',
])
def test_a_selector_true_of_the_device_matches(expression: str) -> None:
    assert matches(expression, _device())


@pytest.mark.parametrize("expression", [
    'device.driver == "nic.example.com"',
    'device.capacity["gpu.example.com"].memory.isLessThan(quantity("1Gi"))',
    '"model" in device.attributes["unknown.example.com"]',
])
def test_a_selector_false_of_the_device_does_not_match(expression: str) -> None:
    assert not matches(expression, _device())


def test_versions_are_ordered_by_their_numbers() -> None:
    device, = read_devices(make_resource_slice_dict("s", DRIVER, [
        {"name": "g0", "attributes": {"driverVersion": {"version": "1.10.0"}}}], node="n1"))
    assert matches('device.attributes["gpu.example.com"].driverVersion'
                   '.isGreaterThan(semver("1.9.0"))', device)


def test_a_missing_attribute_is_an_error_naming_the_expression_and_the_device() -> None:
    with pytest.raises(SelectorError, match=r"'device.attributes\[\"gpu.example.com\"\].x'.*"
                                            r"gpu.example.com/n1/g0"):
        matches('device.attributes["gpu.example.com"].x', _device())


def test_a_selector_that_is_not_a_bool_is_an_error() -> None:
    with pytest.raises(SelectorError, match="yields string, not a bool"):
        matches("device.driver", _device())


def test_a_selector_that_does_not_compile_is_an_error() -> None:
    with pytest.raises(SelectorError, match="does not compile"):
        matches("device.driver ==", _device())


def test_an_expression_is_compiled_once() -> None:
    assert compile_selector("device.driver != 'x'") is compile_selector("device.driver != 'x'")


def test_a_verdict_is_kept_on_the_device() -> None:
    device = _device()
    matches('device.driver == "gpu.example.com"', device)
    assert device.verdicts == {'device.driver == "gpu.example.com"': True}
