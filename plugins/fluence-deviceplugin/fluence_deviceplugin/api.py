"""Facts of the kubelet device plugin API ``v1beta1`` and the generated stubs.

Everything else imports the protocol from here, so the generated modules (kept
verbatim as protoc wrote them) are named in one place.
"""

from __future__ import annotations

from typing import Final

from fluence_deviceplugin.v1beta1 import api_pb2 as pb
from fluence_deviceplugin.v1beta1 import api_pb2_grpc as rpc

API_VERSION: Final = "v1beta1"
"""What ``RegisterRequest.version`` must say for the kubelet to accept us."""

KUBELET_SOCKET: Final = "kubelet.sock"
"""The kubelet's registration socket, a file in the device-plugins directory.
The kubelet recreates it (and wipes the other sockets) when it restarts."""

HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"

__all__ = ["API_VERSION", "HEALTHY", "KUBELET_SOCKET", "UNHEALTHY", "pb", "rpc"]
