"""``fluence up``: run the scheduler against the current kube context or in cluster."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fluence_core import hookimpl, log, names
from fluence_core.cli.base import settings as current_settings
from fluence_core.errors import FluenceError
from fluence_core.resource_config import load_resource_config
from fluence_core.settings import Settings

if TYPE_CHECKING:
    from fluence_core.runtime.refresh import FiguresRefresh

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
"""The namespace a pod runs in, as its mounted service account states it."""


CONNECTIONS_BESIDE = 4
"""Requests in flight besides the bindings and the watches: events, the Lease, the
scheduling loop's own writes, the backend figures' refresh."""


def connect(settings: Settings) -> Any:
    """The API server of the current context (or in cluster); unreachable raises FluenceError."""
    from fluence_core.kube.client import KubeCluster
    from fluence_core.scheduler.core import WATCHED

    # every binding thread, every watch, and the rest (events, the Lease, the loop's own
    # writes, the figures' refresh) may each have a request in flight
    connections = settings.scheduling.bind_pool + len(WATCHED) + CONNECTIONS_BESIDE
    try:
        return KubeCluster.connect(qps=settings.kube.qps, burst=settings.kube.burst,
                                   connections=connections)
    except FluenceError:
        raise  # already says what is missing
    except Exception as error:  # no kubeconfig, no in-cluster token: say so plainly
        raise FluenceError(f"cannot reach a Kubernetes API server: {error}") from None


def lease_namespace(settings: Settings, in_cluster_namespace: Path = SERVICE_ACCOUNT_NAMESPACE,
                    ) -> str:
    """Where the Lease lives: FLUENCE_LEASE_NAMESPACE, else the pod's own namespace in
    cluster, else ``kube-system``, where kube-scheduler keeps its own Lease."""
    if settings.leader.lease_namespace:
        return settings.leader.lease_namespace
    if settings.pod.namespace:
        return settings.pod.namespace
    if in_cluster_namespace.is_file():
        return in_cluster_namespace.read_text().strip() or names.KUBE_SYSTEM
    return names.KUBE_SYSTEM


def _content(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def watch_resources(path: Path, scheduler: Any, stop: threading.Event) -> None:
    """Apply valid changes of the resources file; log and ignore invalid ones.

    The folder is watched, not the file: a ConfigMap volume's file is a link through
    ``..data``, which the kubelet swaps to a new folder at each edit and then removes the
    old one, so a watch on the file sees the first edit and then nothing (it follows
    the removed file). Any change in the folder re-reads the file; the content applied
    last is not applied again (the first change always is).
    """
    from watchfiles import watch

    seen: bytes | None = None
    while not stop.is_set():
        try:
            for _ in watch(path.parent, stop_event=stop, debounce=500):
                content = _content(path)
                if content != seen:
                    seen = content
                    apply_resources(path, scheduler)
            stop.wait(1.0)
        except Exception:  # the watcher outlives a vanished folder or a broken inotify
            log.logger.exception("watching %s broke; watching again", path)
            stop.wait(1.0)


def apply_resources(path: Path, scheduler: Any) -> bool:
    """Load the file and reload the scheduler; log and keep the old graph on any error."""
    try:
        config = load_resource_config(path)
        scheduler.reload_config(config)
    except FluenceError as error:
        log.logger.error("cannot apply the changed resources file, keeping the old graph: %s",
                         error)
        return False
    except Exception:
        log.logger.exception("cannot apply the changed resources file, keeping the old graph")
        return False
    return True


def start_refresh(cluster: Any, scheduler: Any, settings: Settings) -> FiguresRefresh:
    """Keep the backend figures ConfigMap fresh while leading (runtime/refresh.py); the
    caller stops it when leadership ends."""
    from fluence_core.runtime.figures import ConfigMapRef
    from fluence_core.runtime.provider import collect_providers
    from fluence_core.runtime.refresh import FiguresRefresh

    ref = ConfigMapRef(lease_namespace(settings), names.BACKENDS_CONFIGMAP)
    refresh = FiguresRefresh(cluster, lambda: scheduler.config,
                             collect_providers(scheduler.manager), ref,
                             settings.scheduling.backend_refresh)
    refresh.start()
    return refresh


def up() -> None:
    """Run the scheduler against the current kube context (or in cluster), with leader election."""
    from prometheus_client import start_http_server

    from fluence_core.scheduler.core import Scheduler
    from fluence_core.scheduler.leader import LeaderElector

    settings = current_settings()
    cluster = connect(settings)
    scheduler = Scheduler(cluster, settings, bind_workers=settings.scheduling.bind_pool)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    if settings.metrics.port:
        start_http_server(settings.metrics.port, addr=settings.metrics.bind_address,
                          registry=scheduler.metrics.registry)
        log.logger.info("metrics on %s:%d/metrics", settings.metrics.bind_address,
                        settings.metrics.port)

    def lead(stop_leading: threading.Event) -> None:
        scheduler.start()
        refresh = (start_refresh(cluster, scheduler, settings)
                   if settings.scheduling.backend_refresh > 0 else None)
        if settings.graph.resources is not None:
            threading.Thread(target=watch_resources,
                             args=(settings.graph.resources, scheduler, stop_leading),
                             daemon=True, name="resources-watch").start()
        try:
            scheduler.run(stop_leading)
        finally:  # a follower writes no figures; a round in flight may finish
            if refresh is not None:
                refresh.stop()

    if not settings.leader.elect:
        lead(stop)
        return
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    namespace = lease_namespace(settings)
    leader = settings.leader
    elector = LeaderElector(cluster, leader.lease_name, namespace, identity,
                            duration=leader.lease_duration, renew=leader.lease_renew)
    log.logger.info("waiting for lease %s/%s as %s", namespace, leader.lease_name, identity)

    def lead_until_stopped(stop_leading: threading.Event) -> None:
        def relay() -> None:
            stop.wait()
            stop_leading.set()

        threading.Thread(target=relay, daemon=True).start()
        lead(stop_leading)

    elector.run(lead_until_stopped, stop)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("up")(up)
