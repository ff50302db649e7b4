"""Registration with the kubelet: once per type, again after a kubelet restart."""

from __future__ import annotations

from pathlib import Path

from fluence_core.api import names
from fluence_deviceplugin.api import API_VERSION, HEALTHY
from fluence_deviceplugin.testing import WAIT, FakeKubelet

BRAKET_TYPES = ["qdevice", "qpu", "qubit"]
BRAKET_RESOURCES = sorted(names.extended_resource(t) for t in BRAKET_TYPES)


def test_registers_every_type_of_the_braket_config_once(make_manager, kubelet: FakeKubelet) -> None:
    runner = make_manager()
    registrations = kubelet.take(3)
    print("\nregistrations the fake kubelet received for config/resources.yaml:")
    for registration in registrations:
        print("  " + registration.line())
    assert sorted(r.request.resource_name for r in registrations) == BRAKET_RESOURCES
    for registration in registrations:
        request = registration.request
        resource_type = request.resource_name.rsplit("/", 1)[1]
        assert request.version == API_VERSION
        assert request.endpoint == f"fluence-{resource_type}.sock"
        assert registration.endpoint_existed, "registered before the plugin socket was served"
        assert not request.options.pre_start_required
        assert not request.options.get_preferred_allocation_available
    assert kubelet.pending() == []
    assert runner.manager.registered == set(BRAKET_TYPES)


def test_the_kubelet_sees_capacity_healthy_devices_per_type(
    make_manager, kubelet: FakeKubelet
) -> None:
    capacity = make_manager().manager.capacity
    kubelet.take(3)
    for resource_type in BRAKET_TYPES:
        watch = kubelet.watches[names.extended_resource(resource_type)]
        assert watch.first.wait(WAIT)
        assert [d.ID for d in watch.devices] == [f"{resource_type}-{i}" for i in range(capacity)]
        assert {d.health for d in watch.devices} == {HEALTHY}


def test_a_kubelet_restart_leads_to_reregistration(make_manager, kubelet: FakeKubelet) -> None:
    make_manager()
    kubelet.take(3)
    kubelet.restart()
    again = kubelet.take(3)
    assert sorted(r.request.resource_name for r in again) == BRAKET_RESOURCES


def test_sockets_wiped_by_a_restarting_kubelet_are_served_again(
    make_manager, kubelet: FakeKubelet, plugin_dir: Path
) -> None:
    capacity = make_manager().manager.capacity
    kubelet.take(3)
    kubelet.restart(wipe_plugin_sockets=True)
    again = kubelet.take(3)
    assert all(r.endpoint_existed for r in again)
    assert sorted(p.name for p in plugin_dir.iterdir()) == [
        "fluence-qdevice.sock", "fluence-qpu.sock", "fluence-qubit.sock", "kubelet.sock"]
    watch = kubelet.watches[names.extended_resource("qubit")]
    assert watch.first.wait(WAIT), "the new socket does not serve ListAndWatch"
    assert len(watch.devices) == capacity


def test_a_kubelet_that_starts_after_the_plugin_gets_every_type(
    make_manager, plugin_dir: Path
) -> None:
    runner = make_manager()
    assert runner.manager.registered == set()
    late = FakeKubelet(plugin_dir)
    late.start()
    try:
        assert sorted(r.request.resource_name for r in late.take(3)) == BRAKET_RESOURCES
    finally:
        late.stop()


def test_a_refused_type_is_retried_when_the_kubelet_restarts(
    make_manager, kubelet: FakeKubelet
) -> None:
    kubelet.refuse.add(names.extended_resource("qpu"))
    runner = make_manager()
    kubelet.take(3)
    assert runner.manager.registered == {"qdevice", "qubit"}
    kubelet.refuse.clear()
    kubelet.restart()
    assert sorted(r.request.resource_name for r in kubelet.take(3)) == BRAKET_RESOURCES


def test_clean_shutdown_removes_every_socket_it_made(
    make_manager, kubelet: FakeKubelet, plugin_dir: Path
) -> None:
    runner = make_manager()
    kubelet.take(3)
    streams = [kubelet.watches[names.extended_resource(t)] for t in BRAKET_TYPES]
    runner.stop()
    assert [p.name for p in plugin_dir.iterdir()] == ["kubelet.sock"]
    assert all(s.ended.wait(WAIT) for s in streams), "a ListAndWatch stream outlived the plugin"
