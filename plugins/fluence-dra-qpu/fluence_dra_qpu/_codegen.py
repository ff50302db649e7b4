"""Regenerate the committed gRPC modules from ``protocol/*.proto``.

Run ``python -m fluence_dra_qpu._codegen`` after editing a ``.proto``; it needs
``grpcio-tools`` (the ``dev`` extra), which nothing imports at run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
"""The directory holding ``fluence_dra_qpu/``: the include root, so the generated
modules import each other by their full package path."""

PROTOS = ("fluence_dra_qpu/protocol/dra.proto", "fluence_dra_qpu/protocol/registration.proto")


def generate(out_dir: Path = PACKAGE_ROOT) -> None:
    """Write ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` beside each proto."""
    from grpc_tools import protoc  # only a developer needs grpcio-tools

    out = str(out_dir)
    for proto in PROTOS:
        code = protoc.main(["grpc_tools.protoc", f"-I{PACKAGE_ROOT}", f"--python_out={out}",
                            f"--pyi_out={out}", f"--grpc_python_out={out}",
                            str(PACKAGE_ROOT / proto)])
        if code != 0:
            raise RuntimeError(f"protoc failed with exit code {code} on {proto}")


if __name__ == "__main__":  # pragma: no cover
    generate()
    sys.stdout.write(f"regenerated the modules of {', '.join(PROTOS)}\n")
