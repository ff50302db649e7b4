"""``fluence deviceplugin``: contributed through ``fluence_cli``, run as a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from fluence_core.api import Settings
from fluence_core.api import names
from fluence_core.testing import get_plugin_manager
from fluence_deviceplugin.testing import WAIT, FakeKubelet, Registration


STARTUP = 120.0
"""Seconds a fresh interpreter may take to load the CLI and every plugin before it registers.

Not what these tests measure: on a loaded machine it once took longer than :data:`WAIT`.
"""


def registrations(kubelet: FakeKubelet, process: subprocess.Popen[str],
                  count: int) -> list[Registration]:
    """The command's first ``count`` registrations: the first once the process has started
    (waiting while it lives, up to :data:`STARTUP`), each later one within :data:`WAIT`."""
    deadline = time.monotonic() + STARTUP
    while kubelet.registrations.empty():
        if process.poll() is not None:
            output, _ = process.communicate()
            raise AssertionError(f"the command exited ({process.returncode}) before it "
                                 f"registered:\n{output}")
        assert time.monotonic() < deadline, f"no registration in {STARTUP} s"
        time.sleep(0.05)
    return kubelet.take(count)


def test_the_plugin_loads_through_the_fluence_entry_point() -> None:
    manager = get_plugin_manager(Settings())
    info = manager.infos["deviceplugin"]
    assert info.distribution == "fluence-deviceplugin"
    assert info.status == "loaded"
    assert info.hooks == ["fluence_cli", "fluence_settings"]


def test_fluence_cli_adds_the_deviceplugin_command() -> None:
    app = typer.Typer()
    get_plugin_manager(Settings()).get_plugin("deviceplugin").fluence_cli(app=app)
    assert [c.name for c in app.registered_commands] == ["deviceplugin"]


def test_the_fluence_command_line_offers_deviceplugin() -> None:
    result = subprocess.run([sys.executable, "-m", "fluence_core.cli", "--help"],
                            capture_output=True, text=True, timeout=WAIT * 3)
    assert result.returncode == 0
    assert "deviceplugin" in result.stdout


def test_the_command_registers_every_type_and_cleans_up_on_sigterm(
    kubelet: FakeKubelet, plugin_dir: Path, config_file: Path
) -> None:
    env = dict(
        os.environ,
        FLUENCE_DEVICE_PLUGIN_DIR=str(plugin_dir),
        FLUENCE_RESOURCES=str(config_file),
        FLUENCE_RESOURCE_CAPACITY="7",
    )
    process = subprocess.Popen([sys.executable, "-m", "fluence_core.cli", "deviceplugin"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        registered = sorted(r.request.resource_name for r in registrations(kubelet, process, 3))
        assert registered == sorted(names.extended_resource(t) for t in ("qdevice", "qpu", "qubit"))
        watch = kubelet.watches[names.extended_resource("qubit")]
        assert watch.first.wait(WAIT)
        assert len(watch.devices) == 7
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT)
    assert process.returncode == 0, output
    assert [p.name for p in plugin_dir.iterdir()] == ["kubelet.sock"]
    assert "SIGTERM received" in output


def test_the_command_refuses_a_bad_config_with_a_message(
    plugin_dir: Path, config_file: Path
) -> None:
    config_file.write_text("resources: {}\n")
    env = dict(
        os.environ, FLUENCE_DEVICE_PLUGIN_DIR=str(plugin_dir), FLUENCE_RESOURCES=str(config_file)
    )
    result = subprocess.run([sys.executable, "-m", "fluence_core.cli", "deviceplugin"], env=env,
                            capture_output=True, text=True, timeout=WAIT * 3)
    assert result.returncode == 2
    assert "device plugin cannot start" in result.stderr
    assert "resources: expected a list" in result.stderr
    assert list(plugin_dir.iterdir()) == []
