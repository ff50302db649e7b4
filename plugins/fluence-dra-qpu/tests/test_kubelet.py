"""The QPU kubelet plugin over its unix sockets, with the test as the kubelet.

Socket directories are made directly under /tmp: a unix socket path may not
exceed 107 bytes and pytest's tmp_path can be longer.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from fluence_core.api import RESOURCE_CLAIMS, names
from fluence_core.testing import FakeCluster, make_device_request, make_resource_claim_dict
from fluence_dra_qpu.kubelet import KubeletPlugin, Preparer, registration_socket
from fluence_dra_qpu.protocol import dra_pb2, dra_pb2_grpc, registration_pb2, registration_pb2_grpc

RESOURCES = """\
resources:
  - type: qpu
    name: east
    attributes: {provider: braket, region: us-east-1, max-shots: 1000}
"""


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fqk-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def plugin(short_dir: Path, fake_cluster: FakeCluster) -> Iterator[KubeletPlugin]:
    resources = short_dir / "resources.yaml"
    resources.write_text(RESOURCES)
    running = KubeletPlugin(Preparer(fake_cluster, resources, short_dir / "cdi"),
                            short_dir / "registry", short_dir / "plugin")
    running.start()
    yield running
    running.close()


def _allocated_claim(kube: FakeCluster, name: str, device: str = "east0") -> dra_pb2.Claim:
    kube.create(RESOURCE_CLAIMS, make_resource_claim_dict(
        name, [make_device_request("qpu", names.QPU_DEVICE_CLASS)], namespace=None), "default")
    kube.patch_status(RESOURCE_CLAIMS, name, {"status": {"allocation": {"devices": {"results": [
        {"request": "qpu", "driver": names.QPU_DRA_DRIVER, "pool": "cluster",
         "device": device}]}}}}, "default")
    stored = kube.get(RESOURCE_CLAIMS, name, "default")
    assert stored is not None
    return dra_pb2.Claim(namespace="default", name=name, uid=stored["metadata"]["uid"])


def _dra(plugin: KubeletPlugin) -> Any:
    channel = grpc.insecure_channel(f"unix://{plugin.endpoint}")
    return dra_pb2_grpc.DRAPluginStub(channel)


def _info(plugin: KubeletPlugin) -> registration_pb2.PluginInfo:
    socket = registration_socket(plugin.registrar.path.parent, names.QPU_DRA_DRIVER)
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stub = registration_pb2_grpc.RegistrationStub(channel)
        info: registration_pb2.PluginInfo = stub.GetInfo(registration_pb2.InfoRequest(),
                                                         timeout=10)
        stub.NotifyRegistrationStatus(registration_pb2.RegistrationStatus(
            plugin_registered=True), timeout=10)
    return info


def test_the_kubelet_finds_a_dra_plugin_of_the_driver_with_its_endpoint(
        plugin: KubeletPlugin) -> None:
    info = _info(plugin)
    assert info.type == "DRAPlugin"
    assert info.name == names.QPU_DRA_DRIVER
    assert info.endpoint == str(plugin.endpoint)
    assert list(info.supported_versions) == ["v1.DRAPlugin"]
    assert plugin.registration.registered.is_set()


def test_preparing_a_claim_writes_a_cdi_spec_with_the_backends_variables(
        plugin: KubeletPlugin, fake_cluster: FakeCluster) -> None:
    claim = _allocated_claim(fake_cluster, "q1")
    answer = _dra(plugin).NodePrepareResources(
        dra_pb2.NodePrepareResourcesRequest(claims=[claim]), timeout=10).claims[claim.uid]
    assert answer.error == ""
    [device] = answer.devices
    assert (device.pool_name, device.device_name, list(device.request_names)) == (
        "cluster", "east0", ["qpu"])
    assert list(device.cdi_device_ids) == [f"fluxion.flux-framework.org/qpu={claim.uid}-east0"]
    spec = json.loads((plugin.preparer.cdi_dir / f"fluence-qpu-{claim.uid}.json").read_text())
    assert spec["kind"] == "fluxion.flux-framework.org/qpu"
    [cdi_device] = spec["devices"]
    assert cdi_device["name"] == f"{claim.uid}-east0"
    assert sorted(cdi_device["containerEdits"]["env"]) == [
        "FLUXION_BACKEND=east", "FLUXION_MAX_SHOTS=1000", "FLUXION_PROVIDER=braket",
        "FLUXION_REGION=us-east-1"]


def test_unpreparing_removes_the_spec_and_a_second_unprepare_is_no_error(
        plugin: KubeletPlugin, fake_cluster: FakeCluster) -> None:
    claim = _allocated_claim(fake_cluster, "q1")
    stub = _dra(plugin)
    stub.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[claim]), timeout=10)
    for _ in range(2):
        answer = stub.NodeUnprepareResources(
            dra_pb2.NodeUnprepareResourcesRequest(claims=[claim]), timeout=10)
        assert answer.claims[claim.uid].error == ""
    assert list(plugin.preparer.cdi_dir.iterdir()) == []


def test_a_claim_that_cannot_be_prepared_fails_alone_naming_itself(
        plugin: KubeletPlugin, fake_cluster: FakeCluster) -> None:
    good = _allocated_claim(fake_cluster, "good")
    gone = dra_pb2.Claim(namespace="default", name="gone", uid="u-gone")
    stranger = _allocated_claim(fake_cluster, "stranger", device="west0")
    answer = _dra(plugin).NodePrepareResources(
        dra_pb2.NodePrepareResourcesRequest(claims=[good, gone, stranger]), timeout=10)
    assert answer.claims[good.uid].error == ""
    assert answer.claims["u-gone"].error == "ResourceClaim default/gone not found"
    assert "device cluster/west0 is not in" in answer.claims[stranger.uid].error
    assert [p.name for p in plugin.preparer.cdi_dir.iterdir()] == [
        f"fluence-qpu-{good.uid}.json"]


def test_a_claim_recreated_under_another_uid_is_not_prepared(
        plugin: KubeletPlugin, fake_cluster: FakeCluster) -> None:
    claim = _allocated_claim(fake_cluster, "q1")
    old = dra_pb2.Claim(namespace="default", name="q1", uid="an-older-uid")
    answer = _dra(plugin).NodePrepareResources(
        dra_pb2.NodePrepareResourcesRequest(claims=[old]), timeout=10)
    assert "another uid" in answer.claims["an-older-uid"].error
    assert claim.uid != "an-older-uid"


def test_a_wiped_registration_socket_is_served_again_and_registered_anew(
        plugin: KubeletPlugin) -> None:
    _info(plugin)
    plugin.registrar.path.unlink()
    assert plugin.check() is True
    assert not plugin.registration.registered.is_set()
    assert _info(plugin).name == names.QPU_DRA_DRIVER
    assert plugin.registration.registered.is_set()
    assert plugin.check() is False


def test_a_stale_socket_file_of_an_earlier_run_is_replaced(
        short_dir: Path, fake_cluster: FakeCluster) -> None:
    registry = short_dir / "registry"
    registry.mkdir()
    stale = registration_socket(registry, names.QPU_DRA_DRIVER)
    stale.write_text("left by a killed plugin")
    resources = short_dir / "resources.yaml"
    resources.write_text(RESOURCES)
    restarted = KubeletPlugin(Preparer(fake_cluster, resources, short_dir / "cdi"),
                              registry, short_dir / "plugin")
    restarted.start()
    try:
        assert _info(restarted).type == "DRAPlugin"
    finally:
        restarted.close()
    assert not stale.exists()
