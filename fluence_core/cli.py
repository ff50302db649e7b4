"""The ``fluence`` command line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from fluence_core import log
from fluence_core.errors import FluenceError
from fluence_core.graph import ResourceGraph
from fluence_core.kubeyaml import read_objects
from fluence_core.match import GroupMatch, match_group
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.plugins import get_plugin_manager
from fluence_core.resource_config import load_resource_config
from fluence_core.settings import Settings, load_settings

app = typer.Typer(
    help="Fluence: graph scheduling for HPC and hybrid quantum-classical work on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()

NodesOption = typer.Option(..., "--nodes", help="Kubernetes Node YAML (a `kubectl get nodes -o yaml` dump works).")
ResourcesOption = typer.Option(None, "--resources", help="resources.yaml of virtual resources (default: $FLUENCE_RESOURCES).")


def _settings() -> Settings:
    try:
        settings = load_settings()
    except FluenceError as error:
        _fail(error)
    log.configure(settings.log_level)
    return settings


def _fail(error: Exception) -> "typer.Exit":
    console.print(f"[bold red]error:[/] {error}", highlight=False)
    raise typer.Exit(code=2)


def _build_graph(nodes_file: Path, resources: Optional[Path], settings: Settings) -> ResourceGraph:
    try:
        config = load_resource_config(resources or settings.resources)
        nodes = [NodeInfo.from_kube(obj) for obj in read_objects(nodes_file, "Node")]
        graph = ResourceGraph(nodes, config, memory_chunks_per_core=settings.memory_chunks_per_core)
    except (FluenceError, ValueError) as error:
        _fail(error)
    log.logger.info("graph: %s", ", ".join(f"{k}={v}" for k, v in graph.summary().items()))
    return graph


@app.command()
def plugins() -> None:
    """List the plugins that loaded: name, distribution, version, hooks implemented."""
    settings = _settings()
    try:
        manager = get_plugin_manager(settings)
    except FluenceError as error:
        _fail(error)
    table = Table(title="Fluence plugins")
    for column in ("name", "distribution", "version", "hooks", "status"):
        table.add_column(column)
    for info in manager.infos.values():
        table.add_row(info.name, info.distribution, info.version, ", ".join(info.hooks), info.status)
    console.print(table)


@app.command(name="settings")
def show_settings() -> None:
    """List every FLUENCE_* setting: its current value, default and meaning."""
    settings = _settings()
    table = Table(title="Fluence settings (environment variables)")
    for column in ("variable", "value", "default", "meaning"):
        table.add_column(column)
    for name, field in Settings.model_fields.items():
        default = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
        table.add_row(f"FLUENCE_{name.upper()}", _plain(getattr(settings, name)), _plain(default),
                      field.description or "")
    console.print(table)


def _plain(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(empty)"
    if value is None:
        return "(unset)"
    return str(getattr(value, "value", value))


@app.command()
def graph(
    nodes: Path = NodesOption,
    resources: Optional[Path] = ResourcesOption,
    jgf: bool = typer.Option(False, "--jgf", help="Print the JSON Graph Format Fluxion loads."),
) -> None:
    """Build the resource graph and print a summary (or its JGF)."""
    settings = _settings()
    started = time.perf_counter()
    built = _build_graph(nodes, resources, settings)
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
    if built.virtual:
        vtable = Table(title="Virtual resources")
        for column in ("under", "type", "count", "backend", "attributes"):
            vtable.add_column(column)
        rows: dict[tuple[str, str], list[Any]] = {}
        for vertex in built.virtual:
            under = vertex.path.rsplit("/", 1)[0]
            row = rows.setdefault((under, vertex.type), [vertex, 0])
            row[1] += 1
        for (under, vtype), (vertex, count) in rows.items():
            attrs = ", ".join(f"{k}={v}" for k, v in sorted(vertex.attributes.items()))
            vtable.add_row(under, vtype, str(count), vertex.backend, attrs)
        console.print(vtable)
    summary = built.summary()
    console.print(" ".join(f"{k}=[bold]{v}[/]" for k, v in summary.items()))


@app.command()
def plan(
    pods: Path = typer.Argument(..., help="Pod manifests forming one group."),
    nodes: Path = NodesOption,
    resources: Optional[Path] = ResourcesOption,
    group_name: str = typer.Option("plan", "--group", help="Name for the group."),
) -> None:
    """Show the jobspecs a group of pods produces and where the matcher would place it."""
    settings = _settings()
    built = _build_graph(nodes, resources, settings)
    try:
        requests = [PodRequest.from_kube(obj) for obj in read_objects(pods, "Pod")]
        if not requests:
            raise FluenceError(f"{pods}: no Pod objects")
        group = Group(group_name, tuple(requests), requests[0].namespace)
        manager = get_plugin_manager(settings)
        matcher = manager.hook.fluence_matcher(settings=settings, graph=built)
        from fluence_core.jobspec import group_jobspecs

        specs = group_jobspecs(group, built)
        for spec in specs:
            console.print(f"[bold]{spec.kind} jobspec[/]")
            console.print(spec.to_json(), highlight=False, soft_wrap=True)
        if matcher is None:
            console.print("[yellow]no matcher available[/]: jobspecs only, no placement")
            return
        result = match_group(group, built, matcher)
    except (FluenceError, ValueError) as error:
        _fail(error)
    if not isinstance(result, GroupMatch):
        console.print(f"[yellow]{result.reason}[/] (matcher: {matcher.name})")
        raise typer.Exit(code=1)
    table = Table(title=f"Placement by the {matcher.name} matcher (job ids {result.jobids})")
    for column in ("pod", "cores", "memory MiB", "gpus", "node", "backend", "attributes"):
        table.add_column(column)
    for pod in group.pods:
        placement = result.placements[pod.key]
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(placement.attributes.items()))
        table.add_row(pod.key, str(pod.cores), str(pod.memory_mib), str(pod.gpus),
                      placement.node or "-", placement.backend or "-", attrs)
    console.print(table)


@app.command()
def webhook() -> None:
    """Serve the mutating admission webhook (HTTPS, AdmissionReview v1) until SIGTERM."""
    settings = _settings()
    from fluence_core.webhook.main import run

    try:
        run(settings)
    except FluenceError as error:
        _fail(error)


def load_plugin_commands() -> None:
    """Let plugins add sub-commands through ``fluence_cli``; a bad setting is reported, not raised."""
    try:
        manager = get_plugin_manager(load_settings())
    except FluenceError:
        return  # the command itself reports the bad setting
    manager.hook.fluence_cli(app=app)


def main() -> None:
    """The console script: core commands plus those plugins contribute."""
    load_plugin_commands()
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
