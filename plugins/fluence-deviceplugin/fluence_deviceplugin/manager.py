"""Keep one device plugin server per virtual type registered with the kubelet.

The manager is a reconcile loop. ``watchfiles`` wakes it when something in the
device-plugins directory or the config's directory changes, and a periodic tick
wakes it anyway; each wake-up compares what *is* (the config file's content,
the identity of ``kubelet.sock``, our sockets) with what was last acted on. Acting
on observed state rather than on individual events means a coalesced or missed
event, or a ConfigMap's symlink swap, cannot leave the plugin unregistered.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import grpc
import watchfiles

from fluence_core.api import FluenceError, ResourceConfig, Settings, load_resource_config, logger
from fluence_deviceplugin.settings import DevicePluginSettings
from fluence_deviceplugin.api import API_VERSION, KUBELET_SOCKET, pb, rpc
from fluence_deviceplugin.server import TypePluginServer


@dataclass(frozen=True)
class _Identity:
    """Which kubelet.sock this is: a restarted kubelet creates a new file."""

    inode: int
    ctime_ns: int


class _WatchStarted:
    """A stop event for ``watchfiles.watch`` that also reports the watch is live.

    watchfiles polls ``is_set()`` from inside its wait loop, i.e. only after the
    inotify watch exists, so the first poll marks the moment from which no
    change can be missed. Tests wait on :attr:`DevicePluginManager.watching`
    instead of sleeping.
    """

    def __init__(self, stop: threading.Event, started: threading.Event) -> None:
        self._stop = stop
        self._started = started

    def is_set(self) -> bool:
        self._started.set()
        return self._stop.is_set()


def register(plugin_dir: Path, server: TypePluginServer, timeout: float) -> None:
    """Tell the kubelet about one plugin server; raises :class:`grpc.RpcError`.

    ``wait_for_ready`` rides out the moment between the kubelet creating its
    socket and serving on it, bounded by ``timeout``.
    """
    kubelet = Path(plugin_dir).absolute() / KUBELET_SOCKET
    with grpc.insecure_channel(f"unix://{kubelet}") as channel:
        rpc.RegistrationStub(channel).Register(
            pb.RegisterRequest(
                version=API_VERSION,
                endpoint=server.endpoint,
                resource_name=server.resource_name,
                options=server.options,
            ),
            timeout=timeout,
            wait_for_ready=True,
        )


class DevicePluginManager:
    """Runs a :class:`TypePluginServer` per type of the resources config.

    Lifecycle: :meth:`start` (a bad config or directory fails loudly here: a
    plugin that starts with half a config is worse than one that refuses),
    :meth:`run` until the stop event is set, then :meth:`close` removes every
    socket. After a successful start a bad config is logged and the old set of
    types is kept, because taking resources away from a running node on a typo
    would fail pods that are fine.
    """

    def __init__(
        self,
        plugin_dir: Path,
        config_path: Path | None,
        capacity: int,
        *,
        register_timeout: float = 5.0,
        tick_ms: int = 5_000,
        debounce_ms: int = 400,
        step_ms: int = 50,
    ) -> None:
        self.plugin_dir = Path(plugin_dir).absolute()
        self.config_path = Path(config_path).absolute() if config_path is not None else None
        self.capacity = capacity
        self.register_timeout = register_timeout
        self.tick_ms = tick_ms
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.watching = threading.Event()
        """Set once the file watch is live: from then on no change is missed."""
        # Both are replaced, never mutated in place, so another thread may read
        # them (the properties below) while the watch thread reconciles.
        self._servers: dict[str, TypePluginServer] = {}
        self._registered: frozenset[str] = frozenset()
        self._kubelet: _Identity | None = None
        self._config_digest: str | None = None
        self._started = False

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        own: DevicePluginSettings,
        *,
        resources: Path | None = None,
        plugin_dir: Path | None = None,
        capacity: int | None = None,
    ) -> "DevicePluginManager":
        """Build from the core's and the plugin's settings, with command-line overrides."""
        return cls(
            plugin_dir or own.dir,
            resources or settings.graph.resources,
            capacity or own.capacity,
        )

    @property
    def types(self) -> list[str]:
        """The virtual types being served now, in config order."""
        return list(self._servers)

    @property
    def registered(self) -> set[str]:
        """Types the current kubelet has accepted."""
        return set(self._registered)

    def start(self) -> None:
        """Load the config, serve every type and register with the kubelet if it is up."""
        if not self.plugin_dir.is_dir():
            raise FluenceError(f"{self.plugin_dir}: the device-plugins directory does not exist")
        config, digest = self._read_config()
        if not config.types:
            logger.warning(
                "device plugin: %s has no virtual types; nothing to advertise", config.source
            )
        self._config_digest = digest
        self._apply_types(config.types)
        self._started = True
        if self._kubelet_identity() is None:
            logger.info(
                "device plugin: no %s in %s yet; registering when the kubelet creates it",
                KUBELET_SOCKET,
                self.plugin_dir,
            )
        self.reconcile()

    def reconcile(self) -> None:
        """Bring servers and registrations in line with the config and the kubelet."""
        self._reload_config_if_changed()
        kubelet = self._kubelet_identity()
        if kubelet != self._kubelet:
            if kubelet is None:
                logger.warning("device plugin: %s is gone; waiting for the kubelet", KUBELET_SOCKET)
            else:
                logger.info(
                    "device plugin: kubelet is up (%s); registering %d types",
                    KUBELET_SOCKET,
                    len(self._servers),
                )
            self._kubelet = kubelet
            self._registered = frozenset()
        for resource_type, server in self._servers.items():
            if not server.socket_alive():
                logger.warning(
                    "device plugin: socket of %s vanished; serving it again", server.resource_name
                )
                server.restart()
                self._registered -= {resource_type}
        if kubelet is None:
            return
        for resource_type, server in self._servers.items():
            if resource_type in self._registered:
                continue
            try:
                register(self.plugin_dir, server, self.register_timeout)
            except grpc.RpcError as error:
                logger.error(
                    "device plugin: registering %s failed: %s %s"
                    " (retrying on the next change or tick)",
                    server.resource_name,
                    error.code(),
                    error.details(),
                )
                if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    break  # the kubelet is not answering: do not wait out a timeout per type
                continue
            self._registered |= {resource_type}
            logger.info(
                "device plugin: registered %s (endpoint %s)", server.resource_name, server.endpoint
            )

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, reconciling on every file change and tick;
        always ends with :meth:`close`."""
        try:
            if not self._started:
                self.start()
            for _changes in watchfiles.watch(
                *self._watched_dirs(),
                watch_filter=None,
                debounce=self.debounce_ms,
                step=self.step_ms,
                rust_timeout=self.tick_ms,
                yield_on_timeout=True,
                stop_event=_WatchStarted(stop, self.watching),
                raise_interrupt=False,
            ):
                if stop.is_set():
                    break
                try:
                    self.reconcile()
                except Exception:  # keep serving the last good set; the next tick tries again
                    logger.exception(
                        "device plugin: reconciling failed; still serving %s", self.types
                    )
        finally:
            self.close()

    def close(self) -> None:
        """Stop every server and remove its socket (a clean shutdown leaves no files)."""
        servers, self._servers, self._registered = self._servers, {}, frozenset()
        for server in servers.values():
            server.stop()

    # -- internals -------------------------------------------------------

    def _watched_dirs(self) -> list[Path]:
        """The kubelet's directory and the config's; the directory rather than
        the file, since a ConfigMap update swaps a symlink next to the file."""
        dirs = [self.plugin_dir]
        if self.config_path is not None and self.config_path.parent not in dirs:
            dirs.append(self.config_path.parent)
        return dirs

    def _read_config(self) -> tuple[ResourceConfig, str | None]:
        """The validated config and a digest of its bytes (None when there is no file)."""
        if self.config_path is None:
            return ResourceConfig(), None
        try:
            digest = hashlib.sha256(self.config_path.read_bytes()).hexdigest()
        except OSError:
            digest = None
        return load_resource_config(self.config_path), digest

    def _reload_config_if_changed(self) -> None:
        if self.config_path is None:
            return
        try:
            digest: str | None = hashlib.sha256(self.config_path.read_bytes()).hexdigest()
        except OSError:
            digest = "unreadable"
        if digest == self._config_digest:
            return
        self._config_digest = digest
        try:
            config = load_resource_config(self.config_path)
        except FluenceError as error:
            logger.error(
                "device plugin: keeping types %s: the new config is invalid: %s", self.types, error
            )
            return
        except Exception:
            logger.exception(
                "device plugin: keeping types %s: the new config cannot be read", self.types
            )
            return
        if config.types == self.types:
            logger.info("device plugin: %s changed; its types did not", self.config_path)
            return
        logger.info(
            "device plugin: %s changed; types %s -> %s", self.config_path, self.types, config.types
        )
        try:
            self._apply_types(config.types)
        except Exception as error:  # whatever started keeps serving (see _apply_types)
            logger.error(
                "device plugin: cannot serve every new type (now serving %s): %s", self.types, error
            )

    def _apply_types(self, wanted: Iterable[str]) -> None:
        """Stop the servers of types no longer wanted and start the new ones."""
        wanted = list(wanted)
        servers = dict(self._servers)
        for resource_type in [t for t in servers if t not in wanted]:
            servers.pop(resource_type).stop()
            self._registered -= {resource_type}
        try:
            for resource_type in wanted:
                if resource_type not in servers:
                    server = TypePluginServer(resource_type, self.plugin_dir, self.capacity)
                    server.start()
                    servers[resource_type] = server
        finally:  # whatever started is tracked, so close() removes its socket
            self._servers = {t: servers[t] for t in wanted if t in servers}

    def _kubelet_identity(self) -> _Identity | None:
        try:
            stat = (self.plugin_dir / KUBELET_SOCKET).lstat()
        except FileNotFoundError:
            return None
        return _Identity(stat.st_ino, stat.st_ctime_ns)
