"""FluxionSettings: FLUENCE_FLUXION_LIB keeps its name under the plugin's own class."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core.api import ZoneLoad
from fluence_fluxion import plugin
from fluence_fluxion.settings import FluxionSettings


def test_the_library_path_is_read_from_fluence_fluxion_lib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_FLUXION_LIB", "/usr/lib/libreapi_cli.so")
    assert FluxionSettings.load().lib == Path("/usr/lib/libreapi_cli.so")


def test_without_it_the_plugin_stays_inactive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    assert FluxionSettings.load().lib is None
    assert plugin.plugin_status().startswith("inactive: FLUENCE_FLUXION_LIB is not set")


def test_fluence_settings_contributes_the_class() -> None:
    assert plugin.fluence_settings() == [FluxionSettings]


def test_numa_zones_load_on_single_numa_node_policy_nodes_by_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLUENCE_FLUXION_NUMA", raising=False)
    assert FluxionSettings.load().numa is ZoneLoad.POLICY


@pytest.mark.parametrize(("value", "load"), [
    ("all", ZoneLoad.ALL), ("policy", ZoneLoad.POLICY), ("none", ZoneLoad.NONE),
    ("true", ZoneLoad.ALL), ("False", ZoneLoad.NONE)])
def test_fluence_fluxion_numa_names_which_nodes_zones_load_and_the_old_switch_still_reads(
        monkeypatch: pytest.MonkeyPatch, value: str, load: ZoneLoad) -> None:
    monkeypatch.setenv("FLUENCE_FLUXION_NUMA", value)
    assert FluxionSettings.load().numa is load


def test_an_unknown_fluence_fluxion_numa_is_refused_naming_the_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_FLUXION_NUMA", "sometimes")
    with pytest.raises(Exception, match="(?i)numa"):
        FluxionSettings.load()
