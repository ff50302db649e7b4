"""One device plugin gRPC server: one virtual type on its own unix socket.

The kubelet ties one resource name to one endpoint, so every virtual type
(``qdevice``, ``qpu``, ``qubit``, ...) gets its own server and socket. The
devices are quota tokens, not hardware: ``capacity`` of them, all healthy, none
needing anything injected into the container; the Fluence resource graph is what
really limits how many pods get a type.
"""

from __future__ import annotations

import os
import threading
from concurrent import futures
from pathlib import Path
from typing import Final, Iterator

import grpc

from fluence_core.api import logger, names
from fluence_deviceplugin.api import HEALTHY, pb, rpc

SOCKET_PREFIX: Final = "fluence-"
SOCKET_SUFFIX: Final = ".sock"
MAX_UNIX_PATH: Final = 107
"""sun_path holds 108 bytes with the terminating NUL; a longer path cannot be bound."""

OPTIONS: Final = pb.DevicePluginOptions(
    pre_start_required=False, get_preferred_allocation_available=False
)
"""Tokens need no reset before a container starts and any subset is as good as
another, so the kubelet need not call PreStartContainer or GetPreferredAllocation.
Both are still answered correctly in case a kubelet calls them anyway."""


def socket_name(resource_type: str) -> str:
    """The socket file of ``resource_type`` inside the device-plugins directory.

    Prefixed so an operator listing the directory sees which sockets are ours,
    and so two Fluence types can never collide with another vendor's plugin.
    """
    return f"{SOCKET_PREFIX}{resource_type}{SOCKET_SUFFIX}"


def device_ids(resource_type: str, capacity: int) -> list[str]:
    """``<type>-0`` .. ``<type>-<capacity-1>``: stable IDs, so a restarted plugin
    advertises the very devices the kubelet's checkpoint already knows."""
    return [f"{resource_type}-{i}" for i in range(capacity)]


class DevicePluginService(rpc.DevicePluginServicer):
    """The ``v1beta1.DevicePlugin`` service for one virtual type."""

    def __init__(self, resource_type: str, capacity: int) -> None:
        self.resource_type = resource_type
        self.ids = device_ids(resource_type, capacity)
        self._known = frozenset(self.ids)
        self._lock = threading.Lock()
        self._stopping = False
        self._streams: set[threading.Event] = set()

    def close_streams(self) -> None:
        """End every open ListAndWatch stream (and refuse new ones), so stopping
        the server does not wait for its grace period on idle streams."""
        with self._lock:
            self._stopping = True
            for ended in self._streams:
                ended.set()

    def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        return OPTIONS

    def ListAndWatch(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        """Send the full list once, then hold the stream open: the kubelet treats
        a closed stream as the plugin going away. The list never changes while
        the server lives (a new capacity means a new process)."""
        ended = threading.Event()
        context.add_callback(ended.set)  # the kubelet hung up
        with self._lock:
            if self._stopping:
                return
            self._streams.add(ended)
        try:
            yield pb.ListAndWatchResponse(
                devices=[pb.Device(ID=device_id, health=HEALTHY) for device_id in self.ids]
            )
            ended.wait()
        finally:
            with self._lock:
                self._streams.discard(ended)

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        """Tokens are interchangeable: the required ones first, then the first available."""
        responses = []
        for container in request.container_requests:
            chosen = list(dict.fromkeys(container.must_include_deviceIDs))
            for device_id in container.available_deviceIDs:
                if len(chosen) >= container.allocation_size:
                    break
                if device_id not in chosen:
                    chosen.append(device_id)
            responses.append(pb.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return pb.PreferredAllocationResponse(container_responses=responses)

    def Allocate(
        self, request: pb.AllocateRequest, context: grpc.ServicerContext
    ) -> pb.AllocateResponse:
        """One empty response per container: a token needs no device node, mount
        or variable (what the pod got arrives through Fluence's annotations).
        An ID we never advertised means a confused kubelet; refusing it makes the
        container fail visibly instead of running on a quota it does not hold."""
        for container in request.container_requests:
            unknown = [d for d in container.devices_ids if d not in self._known]
            if unknown:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{self.resource_type}: unknown device IDs {unknown[:5]}",
                )
        return pb.AllocateResponse(
            container_responses=[pb.ContainerAllocateResponse() for _ in request.container_requests]
        )

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()


class TypePluginServer:
    """The gRPC server of one type, bound to its socket in ``plugin_dir``.

    It remembers the inode of the socket it bound, so it can tell when the
    kubelet has wiped the directory (the file is gone or is someone else's) and
    never unlinks a socket it did not create.
    """

    def __init__(
        self, resource_type: str, plugin_dir: Path, capacity: int, *, max_workers: int = 4
    ) -> None:
        self.resource_type = resource_type
        self.resource_name = names.extended_resource(resource_type)
        self.plugin_dir = Path(plugin_dir).absolute()
        self.capacity = capacity
        self.endpoint = socket_name(resource_type)
        self.socket_path = self.plugin_dir / self.endpoint
        if len(os.fsencode(self.socket_path)) > MAX_UNIX_PATH:
            raise ValueError(
                f"{self.socket_path}: longer than a unix socket path may be ({MAX_UNIX_PATH} bytes)"
            )
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._service: DevicePluginService | None = None
        self._inode: int | None = None

    @property
    def options(self) -> pb.DevicePluginOptions:
        return OPTIONS

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Bind the socket (replacing a stale file from an earlier run) and serve."""
        if self._server is not None:
            return
        self.socket_path.unlink(missing_ok=True)
        service = DevicePluginService(self.resource_type, self.capacity)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers,
                                                        thread_name_prefix=f"dp-{self.resource_type}"))
        rpc.add_DevicePluginServicer_to_server(service, server)
        try:
            server.add_insecure_port(f"unix://{self.socket_path}")
        except RuntimeError as error:
            raise OSError(
                f"{self.socket_path}: cannot bind the device plugin socket: {error}"
            ) from None
        server.start()
        self._server, self._service = server, service
        self._inode = self.socket_path.lstat().st_ino
        logger.info(
            "device plugin %s serving %d devices on %s",
            self.resource_name,
            self.capacity,
            self.socket_path,
        )

    def socket_alive(self) -> bool:
        """True while our socket file is still in the directory (the kubelet
        removes every plugin socket when it restarts)."""
        if self._server is None:
            return False
        try:
            return self.socket_path.lstat().st_ino == self._inode
        except FileNotFoundError:
            return False

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving and remove our socket, if the file is still ours."""
        server, service = self._server, self._service
        if server is None or service is None:
            return
        service.close_streams()
        server.stop(grace).wait(grace + 1.0)
        if self.socket_alive():
            self.socket_path.unlink(missing_ok=True)
        self._server, self._service, self._inode = None, None, None
        logger.info("device plugin %s stopped", self.resource_name)

    def restart(self) -> None:
        """Stop and serve again on a fresh socket (after the kubelet wiped ours)."""
        self.stop(grace=0)
        self.start()
