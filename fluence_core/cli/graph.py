"""``fluence graph``: build the resource graph from Node YAML and a resources file."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fluence_core import hookimpl, log
from fluence_core.cli.base import console, settings
from fluence_core.errors import FluenceError
from fluence_core.graph import ResourceGraph, levels_for
from fluence_core.dra.devices import Inventory
from fluence_core.dra.vertices import DeviceRow, DeviceVertices, device_rows
from fluence_core.kube.api import NODE_RESOURCE_TOPOLOGIES, RESOURCE_SLICES
from fluence_core.kube.manifests import read_objects
from fluence_core.kube.meta import metadata_or_none
from fluence_core.matcher.domains import DomainRow, ZoneRow, hierarchy, zone_rows
from fluence_core.models import NodeInfo
from fluence_core.numa import read_nrt
from fluence_core.resource_config import load_resource_config

NodesOption = typer.Option(
    ..., "--nodes", help="Kubernetes Node YAML (a `kubectl get nodes -o yaml` dump works; "
    "NodeResourceTopology objects in it give the nodes' NUMA zones, ResourceSlices their "
    "DRA devices).")
ResourcesOption = typer.Option(
    None, "--resources", help="resources.yaml of virtual resources (default: $FLUENCE_RESOURCES).")


def build_graph(nodes_file: Path, resources: Path | None) -> ResourceGraph:
    """The graph of ``nodes_file`` (its Nodes, with the NUMA zones of the
    NodeResourceTopology objects beside them) plus the virtual resources; bad input raises
    FluenceError."""
    current = settings()
    try:
        config = load_resource_config(resources or current.graph.resources)
        objects = read_objects(nodes_file)
        numa = {_name_of(o): read_nrt(o)
                for o in objects if o.get("kind") == NODE_RESOURCE_TOPOLOGIES.kind}
        nodes = [replace(info, numa=numa.get(info.name, info.numa))
                 for info in (NodeInfo.from_kube(obj) for obj in objects
                              if obj.get("kind", "Node") == "Node")]
        built = ResourceGraph(nodes, config,
                              memory_chunks_per_core=current.graph.memory_chunks_per_core,
                              levels=levels_for(config, current))
    except ValueError as failure:
        raise FluenceError(f"{nodes_file}: {failure}") from None
    built.devices = DeviceVertices(_inventory(nodes_file))
    log.logger.info("graph: %s", ", ".join(f"{k}={v}" for k, v in built.summary().items()))
    return built


def _inventory(nodes_file: Path) -> Inventory:
    """The devices of the ResourceSlices in the nodes file (a file holds no claims: all
    are free)."""
    inventory = Inventory()
    try:
        inventory.replace(o for o in read_objects(nodes_file)
                          if o.get("kind") == RESOURCE_SLICES.kind)
    except ValueError as failure:
        raise FluenceError(f"{nodes_file}: {failure}") from None
    return inventory


def _name_of(nrt: dict[str, Any]) -> str:
    """A NodeResourceTopology's name, its node's (ValueError when it has none)."""
    meta = metadata_or_none(nrt)
    name = meta.get("name") if meta is not None else None
    if not isinstance(name, str) or not name:
        raise ValueError("a NodeResourceTopology without metadata.name")
    return name


def graph(
    nodes: Path = NodesOption,
    resources: Path | None = ResourcesOption,
    jgf: bool = typer.Option(False, "--jgf", help="Print the JSON Graph Format Fluxion loads."),
) -> None:
    """Build the resource graph and print a summary (or its JGF)."""
    started = time.perf_counter()
    built = build_graph(nodes, resources)
    elapsed = time.perf_counter() - started
    if jgf:
        sys.stdout.write(built.jgf_text() + "\n")
        return
    table = Table(title=f"Resource graph ({elapsed * 1000:.0f} ms to build)")
    for column in ("node", "rank", "cores", "gpus", "memory MiB", "chunk MiB"):
        table.add_column(column, justify="right" if column != "node" else "left")
    shown = built.nodes
    for node in shown[:20]:
        table.add_row(node.name, str(node.rank), str(node.cores), str(node.gpus),
                      str(node.memory_chunks * node.chunk_mib), str(node.chunk_mib))
    if len(shown) > 20:
        table.add_row(f"... {len(shown) - 20} more", "", "", "", "", "")
    console.print(table)
    if built.levels:
        print_hierarchy(hierarchy(built), "Topology (capacity per domain)", free=False)
    zones = zone_rows(built)
    if zones:
        print_zones(zones, "NUMA zones (capacity per zone)", free=False)
    if built.virtual:
        _print_virtual(built)
    devices = device_rows(built, _inventory(nodes))
    if devices:
        print_devices(devices, "Device vertices (DRA ResourceSlices)")
    summary = built.summary()
    console.print(" ".join(f"{k}=[bold]{v}[/]" for k, v in summary.items()))


def print_hierarchy(rows: list[DomainRow], title: str, *, free: bool) -> None:
    """The topology domains as an indented tree, with their capacity (and what is free)."""
    table = Table(title=title)
    for column in ("domain", "type", "nodes", "cores", "gpus", "memory MiB"):
        table.add_column(column, justify="left" if column in ("domain", "type") else "right")

    def cell(total: int, left: int) -> str:
        return f"{left}/{total}" if free else str(total)

    for row in rows:
        room = row.room
        table.add_row("  " * (len(row.domain) - 1) + row.name, row.type, str(room.nodes),
                      cell(room.cores, room.free_cores), cell(room.gpus, room.free_gpus),
                      cell(room.memory_mib, room.free_memory_mib))
    console.print(table)


def print_zones(rows: list[ZoneRow], title: str, *, free: bool) -> None:
    """Each node's NUMA zones, with their capacity (and what is free), and whether the
    node's kubelet keeps Guaranteed pods inside one zone."""
    table = Table(title=title)
    for column in ("node", "zone", "cores", "gpus", "memory MiB", "kubelet policy"):
        table.add_column(column, justify="left" if column in ("node", "zone") else "right")
    for row in rows:
        room = row.room
        table.add_row(row.node, row.zone, _cell(room.cores, room.free_cores, free),
                      _cell(room.gpus, room.free_gpus, free),
                      _cell(room.memory_mib, room.free_memory_mib, free),
                      "single-numa-node" if row.policy else "")
    console.print(table)


def _cell(total: int, left: int, free: bool) -> str:
    return f"{left}/{total}" if free else str(total)


def print_devices(rows: list[DeviceRow], title: str) -> None:
    """DRA devices: where they are reachable from, their attributes, free or held."""
    table = Table(title=title)
    for column in ("under", "device", "attributes", "state"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.where, row.device, row.attributes, row.state)
    console.print(table)


def _print_virtual(built: ResourceGraph) -> None:
    table = Table(title="Virtual resources")
    for column in ("under", "type", "count", "backend", "attributes"):
        table.add_column(column)
    rows: dict[tuple[str, str], list[Any]] = {}
    for vertex in built.virtual:
        under = vertex.path.rsplit("/", 1)[0]
        row = rows.setdefault((under, vertex.type), [vertex, 0])
        row[1] += 1
    for (under, vtype), (vertex, count) in rows.items():
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(vertex.attributes.items()))
        table.add_row(under, vtype, str(count), vertex.backend, attrs)
    console.print(table)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("graph")(graph)
