"""The committed stubs must describe exactly what api.proto says."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from fluence_deviceplugin import _codegen
from fluence_deviceplugin.v1beta1 import api_pb2


def _drop_json_names(file: descriptor_pb2.FileDescriptorProto) -> None:
    """protoc writes derived json_name fields into a descriptor set but not into
    the module it generates; they follow from the field names, so drop them."""
    def strip(messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            for field in message.field:
                field.ClearField("json_name")
            strip(list(message.nested_type))
    strip(list(file.message_type))


def test_the_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) compiles the proto")
    out = tmp_path / "api.pb"
    _codegen.descriptor_set(out)
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    _drop_json_names(compiled)
    committed = descriptor_pb2.FileDescriptorProto()
    api_pb2.DESCRIPTOR.CopyToProto(committed)
    assert committed == compiled, "api.proto changed: run python -m fluence_deviceplugin._codegen"


def test_the_wire_names_are_the_kubelets() -> None:
    """The kubelet routes by full method name; a typo here registers nothing."""
    services = api_pb2.DESCRIPTOR.services_by_name
    assert services["Registration"].full_name == "v1beta1.Registration"
    assert [m.name for m in services["DevicePlugin"].methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    assert services["DevicePlugin"].methods_by_name["ListAndWatch"].server_streaming
    fields = {f.name: f.number for f in api_pb2.RegisterRequest.DESCRIPTOR.fields}
    assert fields == {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4}
