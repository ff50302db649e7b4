"""The DevicePlugin service of one type, called over its real unix socket."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import grpc
import pytest

from fluence_deviceplugin.api import HEALTHY, pb, rpc
from fluence_deviceplugin.server import TypePluginServer, socket_name
from fluence_deviceplugin.testing import WAIT


@pytest.fixture
def qpu(plugin_dir: Path) -> Iterator[TypePluginServer]:
    server = TypePluginServer("qpu", plugin_dir, capacity=4)
    server.start()
    yield server
    server.stop(grace=0)


@pytest.fixture
def stub(qpu: TypePluginServer) -> Iterator[rpc.DevicePluginStub]:
    with grpc.insecure_channel(f"unix://{qpu.socket_path}") as channel:
        yield rpc.DevicePluginStub(channel)


def test_the_socket_is_named_after_the_type(qpu: TypePluginServer, plugin_dir: Path) -> None:
    assert qpu.socket_path == plugin_dir / "fluence-qpu.sock" == plugin_dir / socket_name("qpu")
    assert qpu.socket_path.is_socket()
    assert qpu.resource_name == "fluxion.flux-framework.org/qpu"


def test_list_and_watch_sends_every_device_healthy_and_keeps_the_stream_open(
    qpu: TypePluginServer, stub: rpc.DevicePluginStub
) -> None:
    call = stub.ListAndWatch(pb.Empty(), timeout=WAIT)
    first = next(call)
    assert [(d.ID, d.health) for d in first.devices] == [
        ("qpu-0", HEALTHY), ("qpu-1", HEALTHY), ("qpu-2", HEALTHY), ("qpu-3", HEALTHY)]
    assert call.is_active(), "the kubelet reads a closed stream as the plugin going away"
    qpu.stop()
    assert list(call) == [], "a clean stop ends the stream without an error or more lists"


def test_options_say_neither_prestart_nor_preferred_allocation(stub: rpc.DevicePluginStub) -> None:
    options = stub.GetDevicePluginOptions(pb.Empty(), timeout=WAIT)
    assert options.pre_start_required is False
    assert options.get_preferred_allocation_available is False


def test_allocate_answers_each_container_with_an_empty_response(stub: rpc.DevicePluginStub) -> None:
    request = pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=["qpu-0"]),
        pb.ContainerAllocateRequest(devices_ids=["qpu-1", "qpu-3"]),
    ])
    response = stub.Allocate(request, timeout=WAIT)
    assert len(response.container_responses) == 2
    for container in response.container_responses:
        assert container == pb.ContainerAllocateResponse()


def test_allocate_refuses_ids_it_never_advertised(stub: rpc.DevicePluginStub) -> None:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=["qpu-0", "qpu-9"])]
    )
    with pytest.raises(grpc.RpcError) as caught:
        stub.Allocate(request, timeout=WAIT)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "qpu-9" in caught.value.details()


def test_preferred_allocation_takes_the_required_then_the_first_available(
    stub: rpc.DevicePluginStub,
) -> None:
    request = pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=["qpu-0", "qpu-1", "qpu-2", "qpu-3"],
            must_include_deviceIDs=["qpu-2"], allocation_size=3),
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=["qpu-3"], allocation_size=1),
    ])
    response = stub.GetPreferredAllocation(request, timeout=WAIT)
    assert [list(c.deviceIDs) for c in response.container_responses] == [
        ["qpu-2", "qpu-0", "qpu-1"], ["qpu-3"]]


def test_pre_start_container_succeeds_with_nothing_to_do(stub: rpc.DevicePluginStub) -> None:
    response = stub.PreStartContainer(
        pb.PreStartContainerRequest(devices_ids=["qpu-1"]), timeout=WAIT
    )
    assert response == pb.PreStartContainerResponse()


def test_stop_leaves_a_socket_that_is_not_its_own(qpu: TypePluginServer) -> None:
    qpu.socket_path.unlink()
    qpu.socket_path.write_text("someone else's file")
    assert not qpu.socket_alive()
    qpu.stop(grace=0)
    assert qpu.socket_path.read_text() == "someone else's file"


def test_a_path_too_long_for_a_unix_socket_is_refused_up_front(plugin_dir: Path) -> None:
    with pytest.raises(ValueError, match="unix socket path"):
        TypePluginServer("q" * 120, plugin_dir, capacity=1)


def test_no_type_can_take_the_kubelets_socket_name() -> None:
    assert socket_name("kubelet") != "kubelet.sock"
