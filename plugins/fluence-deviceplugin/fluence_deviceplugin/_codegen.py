"""Regenerate the committed gRPC modules from ``v1beta1/api.proto``.

The generated modules are committed (see the README for why), so this runs only
when the ``.proto`` changes: ``python -m fluence_deviceplugin._codegen``. It needs
``grpcio-tools`` (the ``dev`` extra); nothing imports it at run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
"""The directory holding ``fluence_deviceplugin/``: the proto include root, so
the generated stubs import each other by their full package path."""

PROTO = "fluence_deviceplugin/v1beta1/api.proto"


def protoc(*outputs: str) -> None:
    """Run the protoc bundled with grpcio-tools on :data:`PROTO` with ``outputs`` flags."""
    from grpc_tools import protoc as grpc_protoc  # only a developer needs grpcio-tools

    args = ["grpc_tools.protoc", f"-I{PACKAGE_ROOT}", *outputs, str(PACKAGE_ROOT / PROTO)]
    code = grpc_protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code} on {PROTO}")


def generate(out_dir: Path = PACKAGE_ROOT) -> None:
    """Write ``api_pb2.py``, ``api_pb2.pyi`` and ``api_pb2_grpc.py`` under ``out_dir``."""
    out = str(out_dir)
    protoc(f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}")


def descriptor_set(path: Path) -> None:
    """Write the compiled FileDescriptorSet of the proto to ``path`` (used by the
    freshness test, which compares it with the committed module's descriptor)."""
    protoc(f"--descriptor_set_out={path}")


if __name__ == "__main__":  # pragma: no cover
    generate()
    sys.stdout.write(f"regenerated the modules of {PROTO}\n")
