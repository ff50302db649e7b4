"""DevicePluginSettings: FLUENCE_DEVICE_PLUGIN_*, the capacity's old name still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core.api import SettingsError
from fluence_deviceplugin import plugin
from fluence_deviceplugin.settings import DevicePluginSettings

VARIABLES = (
    "FLUENCE_DEVICE_PLUGIN_DIR",
    "FLUENCE_DEVICE_PLUGIN_CAPACITY",
    "FLUENCE_RESOURCE_CAPACITY",
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_defaults_are_the_kubelets_directory_and_1000_per_type(env: pytest.MonkeyPatch) -> None:
    settings = DevicePluginSettings.load()
    assert (settings.dir, settings.capacity) == (Path("/var/lib/kubelet/device-plugins"), 1000)


@pytest.mark.parametrize(("variable", "text", "field", "value"), [
    ("FLUENCE_DEVICE_PLUGIN_DIR", "/tmp/dp", "dir", Path("/tmp/dp")),
    ("FLUENCE_DEVICE_PLUGIN_CAPACITY", "64", "capacity", 64),
    ("FLUENCE_RESOURCE_CAPACITY", "64", "capacity", 64),
])
def test_each_variable_is_read(env: pytest.MonkeyPatch, variable: str, text: str, field: str,
                               value: object) -> None:
    env.setenv(variable, text)
    assert getattr(DevicePluginSettings.load(), field) == value


def test_a_zero_capacity_is_refused_by_name(env: pytest.MonkeyPatch) -> None:
    env.setenv("FLUENCE_DEVICE_PLUGIN_CAPACITY", "0")
    with pytest.raises(SettingsError, match="FLUENCE_DEVICE_PLUGIN_CAPACITY='0'"):
        DevicePluginSettings.load()


def test_fluence_settings_contributes_the_class() -> None:
    assert plugin.fluence_settings() == [DevicePluginSettings]
