"""``fluence status``: the graph's use, held allocations and pending groups, read only."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from fluence_core import hookimpl
from fluence_core.cli.base import console
from fluence_core.cli.base import settings as current_settings
from fluence_core.cli.graph import print_devices, print_hierarchy, print_zones
from fluence_core.cli.up import connect


def status() -> None:
    """Show the graph's use per node and virtual resource, held allocations, and pending groups."""
    from fluence_core.scheduler.core import Scheduler
    from fluence_core.scheduler.status import collect_status

    settings = current_settings()
    scheduler = Scheduler(connect(settings), settings, read_only=True)
    scheduler.start()
    report = collect_status(scheduler)
    nodes = Table(title="Nodes (what bound pods request, by kube-scheduler's rule)")
    for column in ("node", "cpu", "fluence", "others", "free", "memory used", "gpus used",
                   "state"):
        nodes.add_column(column)
    for n in report.nodes:
        state = "down" if n.down else "up"
        if n.overcommitted:
            state += f" [bold red]OVERCOMMITTED {', '.join(n.overcommitted)}[/]"
        nodes.add_row(n.name, _cpu(n.millicores), _cpu(n.fluence_millicores),
                      _cpu(n.other_millicores), _cpu(n.free_millicores),
                      f"{n.used_memory_mib}/{n.memory_mib} MiB", f"{n.used_gpus}/{n.gpus}",
                      state)
    console.print(nodes)
    if report.domains:
        print_hierarchy(report.domains, "Topology (free/total per domain)", free=True)
    if report.zones:
        print_zones(report.zones, "NUMA zones (free/total per zone)", free=True)
    if report.virtual:
        virtual = Table(title="Virtual resources")
        for column in ("resource", "type", "held by"):
            virtual.add_column(column)
        for row in report.virtual:
            virtual.add_row(*row)
        console.print(virtual)
    if report.devices:
        print_devices(report.devices, "Devices (DRA)")
    if report.outside:
        outside = Table(title="Topology keys outside the hierarchy (node labels, honoured alone)")
        for column in ("key", "groups"):
            outside.add_column(column)
        for key in report.outside:
            outside.add_row(key.key, ", ".join(key.groups))
        console.print(outside)
    held = Table(title="Held allocations")
    for column in ("owner", "pods", "job ids", "nodes", "virtual"):
        held.add_column(column)
    for h in report.held:
        held.add_row(h.owner, ", ".join(h.pods), ",".join(map(str, h.jobids)), ", ".join(h.nodes),
                     ", ".join(h.virtual))
    console.print(held)
    sliced = [(h, s) for h in report.held for s in h.slices]
    if sliced:
        slices = Table(title="Slices of held groups")
        for column in ("owner", "slice", "domain", "nodes"):
            slices.add_column(column)
        for h, s in sliced:
            slices.add_row(h.owner, s.shown, s.domain, ", ".join(s.nodes))
        console.print(slices)
    grouped = [(h.podset_group, h.owner, "held", h.domain or "-") for h in report.held
               if h.podset_group]
    grouped += [(p.podset_group, p.group, "pending", "-") for p in report.pending
                if p.podset_group]
    if grouped:
        podsets = Table(title="Groups of PodSets (their gangs share one domain)")
        for column in ("group of PodSets", "gang", "state", "domain"):
            podsets.add_column(column)
        for member in sorted(grouped):
            podsets.add_row(*member)
        console.print(podsets)
    pending = Table(title="Pending groups")
    for column in ("group", "pods", "why it waits"):
        pending.add_column(column)
    for p in report.pending:
        pending.add_row(p.group, str(p.pods), p.why)
    console.print(pending)
    if report.reservations:
        reserved = Table(title="Reservations (room held for groups that waited too long)")
        for column in ("group", "cores per node", "whole at"):
            reserved.add_column(column)
        for r in report.reservations:
            reserved.add_row(r.group, ", ".join(f"{n}: {c}" for n, c in sorted(r.nodes.items())),
                             r.start or "as its holders end (no walltime)")
        console.print(reserved)


def _cpu(millicores: int) -> str:
    """Millicores as CPUs, exactly: ``4``, ``0.25``, ``-8``."""
    whole, part = divmod(abs(millicores), 1000)
    sign = "-" if millicores < 0 else ""
    return f"{sign}{whole}" + (f".{part:03d}".rstrip("0") if part else "")


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("status")(status)
