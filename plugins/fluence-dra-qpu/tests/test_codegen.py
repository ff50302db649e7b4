"""The committed stubs are what the protos say, and the wire names are the kubelet's."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_dra_qpu import _codegen
from fluence_dra_qpu.protocol import dra_pb2, registration_pb2

GENERATED = ("dra_pb2.py", "dra_pb2.pyi", "dra_pb2_grpc.py", "registration_pb2.py",
             "registration_pb2.pyi", "registration_pb2_grpc.py")


def test_the_committed_stubs_are_what_the_protos_generate(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) compiles the protos")
    _codegen.generate(tmp_path)
    committed = _codegen.PACKAGE_ROOT / "fluence_dra_qpu" / "protocol"
    fresh = tmp_path / "fluence_dra_qpu" / "protocol"
    stale = [name for name in GENERATED
             if (fresh / name).read_text() != (committed / name).read_text()]
    assert not stale, f"{stale} are stale: run python -m fluence_dra_qpu._codegen"


def test_the_kubelet_routes_to_the_dra_service_by_its_v1_name() -> None:
    service = dra_pb2.DESCRIPTOR.services_by_name["DRAPlugin"]
    assert service.full_name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    assert [m.name for m in service.methods] == ["NodePrepareResources",
                                                 "NodeUnprepareResources"]
    fields = {f.name: f.number for f in dra_pb2.Device.DESCRIPTOR.fields}
    assert fields == {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4}
    assert {f.name: f.number for f in dra_pb2.Claim.DESCRIPTOR.fields} == {
        "namespace": 1, "uid": 2, "name": 3}


def test_the_registration_service_is_the_kubelets_plugin_registration() -> None:
    service = registration_pb2.DESCRIPTOR.services_by_name["Registration"]
    assert service.full_name == "pluginregistration.Registration"
    assert [m.name for m in service.methods] == ["GetInfo", "NotifyRegistrationStatus"]
    fields = {f.name: f.number for f in registration_pb2.PluginInfo.DESCRIPTOR.fields}
    assert fields == {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4}
