"""``fluence qpu-driver``: contributed through ``fluence_cli``."""

from __future__ import annotations

import subprocess
import sys

import typer

from fluence_core.api import Settings
from fluence_core.testing import get_plugin_manager


def test_the_plugin_loads_through_the_fluence_entry_point() -> None:
    info = get_plugin_manager(Settings()).infos["dra-qpu"]
    assert info.distribution == "fluence-dra-qpu"
    assert info.status == "loaded"
    assert info.hooks == ["fluence_cli", "fluence_settings"]


def test_fluence_cli_adds_the_driver_and_kubelet_plugin_commands() -> None:
    app = typer.Typer()
    get_plugin_manager(Settings()).get_plugin("dra-qpu").fluence_cli(app=app)
    assert [c.name for c in app.registered_commands] == ["qpu-driver", "qpu-kubelet-plugin"]


def test_without_a_resources_file_the_command_says_what_is_missing() -> None:
    result = subprocess.run([sys.executable, "-m", "fluence_core.cli", "qpu-driver"],
                            capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    assert result.returncode != 0
    assert "no resources file" in result.stderr + result.stdout


def test_the_kubelet_plugin_without_a_resources_file_says_what_is_missing() -> None:
    result = subprocess.run([sys.executable, "-m", "fluence_core.cli", "qpu-kubelet-plugin"],
                            capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    assert result.returncode != 0
    assert "qpu kubelet plugin: no resources file" in result.stderr + result.stdout
