"""Test doubles for the device plugin: a fake kubelet speaking real gRPC.

Shipped in the package so anyone changing the plugin (or writing another one)
can exercise it against a kubelet-shaped peer without a node. Everything here
waits on events with short bounds; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from fluence_deviceplugin.api import KUBELET_SOCKET, pb, rpc
from fluence_deviceplugin.manager import DevicePluginManager

WAIT = 10.0
"""Upper bound for any wait on an event; a passing test never waits this long."""


@dataclass
class Registration:
    """What the fake kubelet saw in one Register call."""

    request: pb.RegisterRequest
    endpoint_existed: bool

    def line(self) -> str:
        return (f"resource_name={self.request.resource_name} endpoint={self.request.endpoint} "
                f"version={self.request.version} "
                f"pre_start_required={self.request.options.pre_start_required} "
                f"get_preferred_allocation_available={self.request.options.get_preferred_allocation_available}")


@dataclass
class _Watch:
    """The ListAndWatch stream the fake kubelet opens after a registration."""

    first: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    devices: list[pb.Device] = field(default_factory=list)


class FakeKubelet(rpc.RegistrationServicer):
    """Serves ``v1beta1.Registration`` on ``kubelet.sock`` and, like the real
    kubelet, dials the plugin back and opens ListAndWatch after each Register.

    Each ListAndWatch stream lives on its own thread with its own channel; a
    channel is never touched from two threads, and :meth:`stop` ends streams by
    cancelling their calls, which grpc allows from any thread.
    """

    def __init__(self, plugin_dir: Path) -> None:
        self.plugin_dir = plugin_dir
        self.registrations: "queue.Queue[Registration]" = queue.Queue()
        self.watches: dict[str, _Watch] = {}
        self.refuse: set[str] = set()
        self._server: grpc.Server | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._calls: list[grpc.Future] = []
        self._threads: list[threading.Thread] = []

    @property
    def socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET

    def start(self) -> None:
        with self._lock:
            self._stopping = False
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        rpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Go away like a dying kubelet: stop serving, drop the plugin streams, unlink the socket.
        """
        if self._server is not None:
            self._server.stop(0).wait(WAIT)
            self._server = None
        with self._lock:
            self._stopping = True
            calls, self._calls = self._calls, []
            threads, self._threads = self._threads, []
        for call in calls:
            call.cancel()
        for thread in threads:
            thread.join(WAIT)
        self.socket.unlink(missing_ok=True)

    def restart(self, wipe_plugin_sockets: bool = False) -> None:
        """What a kubelet restart looks like from the directory: kubelet.sock
        recreated (a new file), and optionally every other socket removed."""
        self.stop()
        if wipe_plugin_sockets:
            for path in self.plugin_dir.iterdir():
                path.unlink()
        self.start()

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        endpoint = self.plugin_dir / request.endpoint
        self.registrations.put(Registration(pb.RegisterRequest.FromString(request.SerializeToString()),
                                            endpoint.exists()))
        if request.resource_name in self.refuse:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{request.resource_name} is taken")
        watch = _Watch()
        self.watches[request.resource_name] = watch
        thread = threading.Thread(target=self._list_and_watch, args=(endpoint, watch), daemon=True)
        with self._lock:
            if not self._stopping:
                thread.start()
                self._threads.append(thread)
        return pb.Empty()

    def _list_and_watch(self, endpoint: Path, watch: _Watch) -> None:
        try:
            with grpc.insecure_channel(f"unix://{endpoint}") as channel:
                call = rpc.DevicePluginStub(channel).ListAndWatch(pb.Empty())
                with self._lock:
                    if self._stopping:
                        call.cancel()
                    else:
                        self._calls.append(call)
                for response in call:
                    watch.devices = list(response.devices)
                    watch.first.set()
        except grpc.RpcError:
            pass
        finally:
            watch.ended.set()

    def take(self, count: int) -> list[Registration]:
        """The next ``count`` registrations, waiting at most :data:`WAIT` for each."""
        taken = []
        for _ in range(count):
            try:
                taken.append(self.registrations.get(timeout=WAIT))
            except queue.Empty:
                raise AssertionError(f"expected {count} registrations, got {len(taken)}: "
                                     f"{[r.request.resource_name for r in taken]}") from None
        return taken

    def pending(self) -> list[str]:
        """Registrations received and not yet taken (no waiting)."""
        names = []
        while True:
            try:
                names.append(self.registrations.get_nowait().request.resource_name)
            except queue.Empty:
                return names


class LogRecords(logging.Handler):
    """Collects the fluence logger's records so a test can wait for one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: "queue.Queue[logging.LogRecord]" = queue.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.put(record)

    def wait_for(self, level: int, text: str) -> logging.LogRecord:
        """The first record at ``level`` whose message contains ``text``."""
        seen: list[str] = []
        while True:
            try:
                record = self.records.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(
                    f"no {logging.getLevelName(level)} record containing {text!r}; saw {seen}"
                ) from None
            message = record.getMessage()
            if record.levelno == level and text in message:
                return record
            seen.append(message)


class RunningManager:
    """A manager running its watch loop in a thread, as the command does."""

    def __init__(self, manager: DevicePluginManager) -> None:
        self.manager = manager
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=manager.run, args=(self.stop_event,), daemon=True)

    def start(self) -> "RunningManager":
        self.thread.start()
        assert self.manager.watching.wait(WAIT), "the file watch never started"
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the manager did not stop"
