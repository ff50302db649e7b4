"""Config changes while running: types added and removed, bad configs ignored."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fluence_core.api import FluenceError
from fluence_core.api import names
from fluence_deviceplugin.manager import DevicePluginManager
from fluence_deviceplugin.testing import WAIT, FakeKubelet, LogRecords

QPU_AND_LICENCE = """
resources:
  - type: qdevice
    with:
      - type: qpu
  - type: licence
    count: 4
"""


def replace_file(path: Path, text: str) -> None:
    """Write a new version the way a ConfigMap update does: a new file renamed over the old."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    fresh.replace(path)


def sockets(plugin_dir: Path) -> list[str]:
    return sorted(p.name for p in plugin_dir.iterdir() if p.name != "kubelet.sock")


def test_a_config_change_adds_and_removes_types(
    make_manager, kubelet: FakeKubelet, config_file: Path, plugin_dir: Path
) -> None:
    runner = make_manager()
    kubelet.take(3)
    qubit_stream = kubelet.watches[names.extended_resource("qubit")]
    replace_file(config_file, QPU_AND_LICENCE)
    [added] = kubelet.take(1)
    assert added.request.resource_name == names.extended_resource("licence")
    assert added.request.endpoint == "fluence-licence.sock"
    assert runner.manager.types == ["qdevice", "qpu", "licence"]
    assert sockets(plugin_dir) == [
        "fluence-licence.sock",
        "fluence-qdevice.sock",
        "fluence-qpu.sock",
    ]
    assert qubit_stream.ended.wait(WAIT), (
        "the removed type's stream must end so the kubelet drops it"
    )
    assert kubelet.pending() == [], "unchanged types must not register again"


def test_an_edit_in_place_is_seen_too(
    make_manager, kubelet: FakeKubelet, config_file: Path
) -> None:
    runner = make_manager()
    kubelet.take(3)
    config_file.write_text(QPU_AND_LICENCE)
    assert kubelet.take(1)[0].request.resource_name == names.extended_resource("licence")
    assert runner.manager.types == ["qdevice", "qpu", "licence"]


def test_a_bad_config_keeps_the_old_types_and_logs_why(
    make_manager, kubelet: FakeKubelet, config_file: Path, plugin_dir: Path, log_records: LogRecords
) -> None:
    runner = make_manager()
    kubelet.take(3)
    replace_file(config_file, "resources:\n  - type: qpu\n    count: -1\n")
    record = log_records.wait_for(logging.ERROR, "keeping types")
    assert "['qdevice', 'qpu', 'qubit']" in record.getMessage()
    assert "resources[0]: count must be an integer from 1 to" in record.getMessage()
    assert str(config_file) in record.getMessage()
    assert runner.manager.types == ["qdevice", "qpu", "qubit"]
    assert sockets(plugin_dir) == ["fluence-qdevice.sock", "fluence-qpu.sock", "fluence-qubit.sock"]
    # Still watching: the next good config is applied.
    replace_file(config_file, QPU_AND_LICENCE)
    assert kubelet.take(1)[0].request.resource_name == names.extended_resource("licence")


def test_a_deleted_config_keeps_the_old_types_and_logs_why(
    make_manager, kubelet: FakeKubelet, config_file: Path, log_records: LogRecords
) -> None:
    runner = make_manager()
    kubelet.take(3)
    config_file.unlink()
    record = log_records.wait_for(logging.ERROR, "keeping types")
    assert "cannot read" in record.getMessage()
    assert runner.manager.types == ["qdevice", "qpu", "qubit"]


def test_a_bad_config_at_start_is_refused_loudly(plugin_dir: Path, config_file: Path) -> None:
    config_file.write_text("resources:\n  - name: no-type\n")
    manager = DevicePluginManager(plugin_dir, config_file, 5)
    with pytest.raises(FluenceError, match="missing 'type'"):
        manager.start()
    assert sockets(plugin_dir) == []


def test_a_missing_device_plugin_directory_is_refused_loudly(
    short_dir: Path, config_file: Path
) -> None:
    manager = DevicePluginManager(short_dir / "absent", config_file, 5)
    with pytest.raises(FluenceError, match="device-plugins directory does not exist"):
        manager.start()


def test_a_type_kubernetes_would_refuse_keeps_the_old_types_and_logs_why(
    make_manager, kubelet: FakeKubelet, config_file: Path, plugin_dir: Path, log_records: LogRecords
) -> None:
    """A type name past 63 characters is no extended resource name: the whole edit is refused
    (a socket path too long for a valid name is checked by the server, see test_service)."""
    runner = make_manager()
    kubelet.take(3)
    too_long = "q" * 120
    replace_file(config_file, f"resources:\n  - type: qdevice\n  - type: {too_long}\n")
    record = log_records.wait_for(logging.ERROR, "keeping types")
    assert "must be at most 63 characters" in record.getMessage()
    assert runner.manager.types == ["qdevice", "qpu", "qubit"]
    assert sockets(plugin_dir) == ["fluence-qdevice.sock", "fluence-qpu.sock", "fluence-qubit.sock"]
