"""FluxionSettings: FLUENCE_FLUXION_LIB keeps its name under the plugin's own class."""

from __future__ import annotations

from pathlib import Path

import pytest

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
