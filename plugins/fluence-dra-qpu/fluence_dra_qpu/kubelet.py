"""The QPU kubelet plugin: the kubelet's DRA API and plugin registration, over unix sockets.

Two gRPC servers. The registration socket, ``<driver>-reg.sock`` in the kubelet's
``plugins_registry`` directory, is where the kubelet finds the plugin: it asks
``GetInfo`` (a ``DRAPlugin`` named after the driver, its endpoint, the service
``v1.DRAPlugin``) and reports the outcome with ``NotifyRegistrationStatus``. The
DRA socket, ``dra.sock`` in the driver's own plugin directory, serves
``NodePrepareResources`` and ``NodeUnprepareResources``.

Preparing a claim reads it from the API server (the request names it only),
takes the devices allocated to it from this driver, finds each in the resources
file as the driver published it, and writes a CDI spec whose devices set
``FLUXION_BACKEND`` and ``FLUXION_<KEY>``; the answer names those CDI devices.
Unpreparing removes the spec. Each claim succeeds or fails on its own, with an
error naming it, as the API asks.

Restarts: a restarted plugin removes its stale sockets and binds anew, and the
kubelet, which watches the registry directory, registers it again. A restarted
kubelet rescans the directory and calls ``GetInfo`` again; should a socket file
vanish (a wiped directory), :meth:`KubeletPlugin.check` binds it again, so a pass
of the run loop re-registers the plugin, as the device plugin re-registers.
"""

from __future__ import annotations

import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from fluence_core.api import (
    RESOURCE_CLAIMS, ClusterAPI, FluenceError, load_resource_config, logger, metadata_of,
    names,
)
from fluence_dra_qpu.cdi import device_id, remove_spec, write_spec
from fluence_dra_qpu.devices import device_env
from fluence_dra_qpu.protocol import dra_pb2, dra_pb2_grpc, registration_pb2, registration_pb2_grpc

PLUGIN_TYPE = "DRAPlugin"
SERVICE = "v1.DRAPlugin"
"""What ``supported_versions`` names: the gRPC services served at the endpoint."""
DRA_SOCKET = "dra.sock"
MAX_UNIX_PATH = 107


def registration_socket(registry_dir: Path, driver: str) -> Path:
    return registry_dir / f"{driver}-reg.sock"


class Preparer:
    """Claims to CDI specs and back: what the DRA service does, apart from gRPC."""

    def __init__(self, kube: ClusterAPI, resources: Path, cdi_dir: Path,
                 driver: str = names.QPU_DRA_DRIVER) -> None:
        self.kube, self.resources, self.cdi_dir, self.driver = kube, resources, cdi_dir, driver

    def prepare(self, claim: dra_pb2.Claim) -> dra_pb2.NodePrepareResourceResponse:
        where = f"ResourceClaim {claim.namespace}/{claim.name}"
        try:
            stored = self.kube.get(RESOURCE_CLAIMS, claim.name, claim.namespace)
            if stored is None:
                raise FluenceError(f"{where} not found")
            if metadata_of(stored).get("uid") != claim.uid:
                raise FluenceError(f"{where} has another uid than {claim.uid} (recreated?)")
            allocation = (stored.get("status") or {}).get("allocation") or {}
            results = [r for r in (allocation.get("devices") or {}).get("results") or []
                       if r.get("driver") == self.driver]
            if not results:
                raise FluenceError(f"{where} has no device of {self.driver} allocated")
            env = device_env(load_resource_config(self.resources))
            devices, answer = [], []
            for result in results:
                key = (str(result.get("pool")), str(result.get("device")))
                if key not in env:
                    raise FluenceError(
                        f"{where}: device {key[0]}/{key[1]} is not in {self.resources}"
                        " (the file changed since the claim was allocated?)")
                name = f"{claim.uid}-{key[1]}"
                devices.append((name, env[key]))
                answer.append(dra_pb2.Device(
                    request_names=[str(result.get("request", ""))], pool_name=key[0],
                    device_name=key[1], cdi_device_ids=[device_id(name)]))
            path = write_spec(self.cdi_dir, claim.uid, devices)
        except (FluenceError, OSError) as error:
            logger.error("qpu kubelet plugin: cannot prepare %s: %s", where, error)
            return dra_pb2.NodePrepareResourceResponse(error=str(error))
        logger.info("qpu kubelet plugin: %s prepared: %s (%s)", where,
                    ", ".join(f"{d.pool_name}/{d.device_name}" for d in answer), path)
        return dra_pb2.NodePrepareResourceResponse(devices=answer)

    def unprepare(self, claim: dra_pb2.Claim) -> dra_pb2.NodeUnprepareResourceResponse:
        try:
            removed = remove_spec(self.cdi_dir, claim.uid)
        except OSError as error:
            return dra_pb2.NodeUnprepareResourceResponse(
                error=f"ResourceClaim {claim.namespace}/{claim.name}: {error}")
        logger.info("qpu kubelet plugin: ResourceClaim %s/%s unprepared%s", claim.namespace,
                    claim.name, "" if removed else " (it had no spec)")
        return dra_pb2.NodeUnprepareResourceResponse()


class _DraService(dra_pb2_grpc.DRAPluginServicer):
    def __init__(self, preparer: Preparer) -> None:
        self.preparer = preparer

    def NodePrepareResources(self, request: dra_pb2.NodePrepareResourcesRequest,
                             context: Any) -> dra_pb2.NodePrepareResourcesResponse:
        return dra_pb2.NodePrepareResourcesResponse(
            claims={c.uid: self.preparer.prepare(c) for c in request.claims})

    def NodeUnprepareResources(self, request: dra_pb2.NodeUnprepareResourcesRequest,
                               context: Any) -> dra_pb2.NodeUnprepareResourcesResponse:
        return dra_pb2.NodeUnprepareResourcesResponse(
            claims={c.uid: self.preparer.unprepare(c) for c in request.claims})


class _RegistrationService(registration_pb2_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: Path) -> None:
        self.driver, self.endpoint = driver, endpoint
        self.registered = threading.Event()
        self.infos = 0
        """GetInfo calls answered: one per registration the kubelet started."""

    def GetInfo(self, request: registration_pb2.InfoRequest,
                context: Any) -> registration_pb2.PluginInfo:
        self.infos += 1
        return registration_pb2.PluginInfo(type=PLUGIN_TYPE, name=self.driver,
                                           endpoint=str(self.endpoint),
                                           supported_versions=[SERVICE])

    def NotifyRegistrationStatus(self, request: registration_pb2.RegistrationStatus,
                                 context: Any) -> registration_pb2.RegistrationStatusResponse:
        if request.plugin_registered:
            logger.info("qpu kubelet plugin: registered with the kubelet as %s", self.driver)
            self.registered.set()
        else:
            logger.error("qpu kubelet plugin: the kubelet refused the registration: %s",
                         request.error or "no reason given")
            self.registered.clear()
        return registration_pb2.RegistrationStatusResponse()


class _Socket:
    """One gRPC server on one unix socket, rebound when its file is gone."""

    def __init__(self, path: Path, add: Any, what: str) -> None:
        if len(str(path)) > MAX_UNIX_PATH:
            raise OSError(f"{path}: longer than a unix socket path may be ({MAX_UNIX_PATH} bytes)")
        self.path, self._add, self.what = path, add, what
        self._server: grpc.Server | None = None
        self._inode: int | None = None

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)  # a stale file of an earlier run
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4,
                                                        thread_name_prefix="qpu-kubelet"))
        self._add(server)
        try:
            server.add_insecure_port(f"unix://{self.path}")
        except RuntimeError as error:
            raise OSError(f"{self.path}: cannot bind the {self.what} socket: {error}") from None
        server.start()
        self._server, self._inode = server, self.path.lstat().st_ino
        logger.info("qpu kubelet plugin: %s served on %s", self.what, self.path)

    def alive(self) -> bool:
        try:
            return self._server is not None and self.path.lstat().st_ino == self._inode
        except FileNotFoundError:
            return False

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.stop(1.0).wait(2.0)
        if self.alive():
            self.path.unlink(missing_ok=True)
        self._server, self._inode = None, None


class KubeletPlugin:
    """The registration and DRA servers of one node; :meth:`start`, :meth:`run`, :meth:`close`."""

    def __init__(self, preparer: Preparer, registry_dir: Path, plugin_dir: Path) -> None:
        self.preparer = preparer
        self.endpoint = plugin_dir / DRA_SOCKET
        self.registration = _RegistrationService(preparer.driver, self.endpoint)
        self.dra = _Socket(
            self.endpoint,
            lambda server: dra_pb2_grpc.add_DRAPluginServicer_to_server(
                _DraService(preparer), server), "DRA service")
        self.registrar = _Socket(
            registration_socket(registry_dir, preparer.driver),
            lambda server: registration_pb2_grpc.add_RegistrationServicer_to_server(
                self.registration, server), "registration")

    def start(self) -> None:
        """The DRA socket first, so the kubelet that finds the registration can use it."""
        self.dra.start()
        self.registrar.start()

    def check(self) -> bool:
        """Rebind a socket whose file is gone; True when one was."""
        rebound = False
        for socket in (self.dra, self.registrar):
            if not socket.alive():
                logger.warning("qpu kubelet plugin: %s is gone; serving it again", socket.path)
                socket.stop()
                socket.start()
                rebound = True
        if rebound:  # the kubelet registers the new socket anew
            self.registration.registered.clear()
        return rebound

    def run(self, stop: threading.Event, interval: float) -> None:
        while not stop.wait(interval):
            self.check()

    def close(self) -> None:
        """Stop serving and remove both sockets (the CDI specs stay for the kubelet)."""
        self.registrar.stop()
        self.dra.stop()
