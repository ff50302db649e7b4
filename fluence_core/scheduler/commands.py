"""``fluence up`` and ``fluence status``: the scheduler's commands, added through ``fluence_cli``."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from fluence_core import log
from fluence_core.errors import FluenceError
from fluence_core.resource_config import load_resource_config
from fluence_core.settings import Settings, load_settings

console = Console()


def _settings() -> Settings:
    try:
        settings = load_settings()
    except FluenceError as error:
        console.print(f"[bold red]error:[/] {error}", highlight=False)
        raise typer.Exit(code=2) from None
    log.configure(settings.log_level)
    return settings


def _connect(settings: Settings) -> Any:
    from fluence_core.kube import KubeCluster

    try:
        return KubeCluster.connect(qps=settings.kube_qps, burst=settings.kube_burst)
    except Exception as error:  # no kubeconfig, no in-cluster token: say so plainly
        console.print(f"[bold red]error:[/] cannot reach a Kubernetes API server: {error}", highlight=False)
        raise typer.Exit(code=2) from None


def watch_resources(path: Path, scheduler: Any, stop: threading.Event) -> None:
    """Apply valid changes of the resources file; log and ignore invalid ones."""
    from watchfiles import watch

    for _ in watch(path, stop_event=stop, debounce=500):
        try:
            config = load_resource_config(path)
            scheduler.reload_config(config)
        except FluenceError as error:
            log.logger.error("cannot apply the changed resources file, keeping the old graph: %s",
                             error)


def up() -> None:
    """Run the scheduler against the current kube context (or in cluster), with leader election."""
    from prometheus_client import start_http_server

    from fluence_core.scheduler.core import Scheduler
    from fluence_core.scheduler.leader import LeaderElector

    settings = _settings()
    cluster = _connect(settings)
    try:
        scheduler = Scheduler(cluster, settings, bind_workers=settings.bind_workers)
    except FluenceError as error:
        console.print(f"[bold red]error:[/] {error}", highlight=False)
        raise typer.Exit(code=2) from None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    if settings.metrics_port:
        start_http_server(settings.metrics_port, registry=scheduler.metrics.registry)
        log.logger.info("metrics on :%d/metrics", settings.metrics_port)

    def lead(stop_leading: threading.Event) -> None:
        scheduler.start()
        if settings.resources is not None:
            threading.Thread(target=watch_resources, args=(settings.resources, scheduler, stop_leading),
                             daemon=True, name="resources-watch").start()
        scheduler.run(stop_leading)

    if not settings.leader_elect:
        lead(stop)
        return
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    elector = LeaderElector(cluster, settings.lease_name, settings.lease_namespace, identity,
                            duration=settings.lease_duration, renew=settings.lease_renew)
    log.logger.info("waiting for lease %s/%s as %s", settings.lease_namespace, settings.lease_name, identity)

    def lead_until_stopped(stop_leading: threading.Event) -> None:
        def relay() -> None:
            stop.wait()
            stop_leading.set()

        threading.Thread(target=relay, daemon=True).start()
        lead(stop_leading)

    elector.run(lead_until_stopped, stop)


def status() -> None:
    """Show the graph's use per node and virtual resource, held allocations, and pending groups."""
    from fluence_core.scheduler.core import Scheduler
    from fluence_core.scheduler.status import collect_status

    settings = _settings()
    cluster = _connect(settings)
    try:
        scheduler = Scheduler(cluster, settings, read_only=True)
        scheduler.start()
    except FluenceError as error:
        console.print(f"[bold red]error:[/] {error}", highlight=False)
        raise typer.Exit(code=2) from None
    report = collect_status(scheduler)
    nodes = Table(title="Nodes")
    for column in ("node", "cores", "fluence", "others", "free", "gpus used", "state"):
        nodes.add_column(column)
    for n in report.nodes:
        free = n.cores - n.fluence_cores - n.other_cores
        nodes.add_row(n.name, str(n.cores), str(n.fluence_cores), str(n.other_cores), str(free),
                      f"{n.used_gpus}/{n.gpus}", "down" if n.down else "up")
    console.print(nodes)
    if report.virtual:
        virtual = Table(title="Virtual resources")
        for column in ("resource", "type", "held by"):
            virtual.add_column(column)
        for row in report.virtual:
            virtual.add_row(*row)
        console.print(virtual)
    held = Table(title="Held allocations")
    for column in ("owner", "pods", "job ids", "nodes", "virtual"):
        held.add_column(column)
    for h in report.held:
        held.add_row(h.owner, ", ".join(h.pods), ",".join(map(str, h.jobids)), ", ".join(h.nodes), ", ".join(h.virtual))
    console.print(held)
    pending = Table(title="Pending groups")
    for column in ("group", "pods", "why it waits"):
        pending.add_column(column)
    for p in report.pending:
        pending.add_row(p.group, str(p.pods), p.why)
    console.print(pending)


def register(app: typer.Typer) -> None:
    app.command(name="up")(up)
    app.command(name="status")(status)
