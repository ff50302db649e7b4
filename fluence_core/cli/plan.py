"""``fluence plan``: the jobspecs a group of pods produces and where it would be placed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fluence_core import hookimpl
from fluence_core.cli.base import console, settings
from fluence_core.cli.graph import NodesOption, ResourcesOption, build_graph
from fluence_core.errors import FluenceError
from fluence_core.matcher.jobspec import group_jobspecs
from fluence_core.kubeyaml import read_objects
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.pooled import pooled
from fluence_core.models import Group, PodRequest
from fluence_core.plugins import get_plugin_manager


def plan(
    pods: Path = typer.Argument(..., help="Pod manifests forming one group."),
    nodes: Path = NodesOption,
    resources: Path | None = ResourcesOption,
    group_name: str = typer.Option("plan", "--group", help="Name for the group."),
) -> None:
    """Show the jobspecs a group of pods produces and where the matcher would place it."""
    current = settings()
    built = build_graph(nodes, resources)
    try:
        requests = [PodRequest.from_kube(obj) for obj in read_objects(pods, "Pod")]
    except ValueError as failure:
        raise FluenceError(f"{pods}: {failure}") from None
    if not requests:
        raise FluenceError(f"{pods}: no Pod objects")
    group = Group(group_name, tuple(requests), requests[0].namespace)
    matcher = get_plugin_manager(current).hook.fluence_matcher(settings=current, graph=built)
    try:
        specs = group_jobspecs(group, built)
    except ValueError as failure:
        raise FluenceError(f"{pods}: {failure}") from None
    for spec in specs:
        console.print(f"[bold]{spec.kind} jobspec[/]")
        console.print(spec.to_json(), highlight=False, soft_wrap=True)
    if matcher is None:
        console.print("[yellow]no matcher available[/]: jobspecs only, no placement")
        return
    try:
        result = match_group(group, built, pooled(matcher, built))
    except ValueError as failure:
        raise FluenceError(f"{pods}: {failure}") from None
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


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("plan")(plan)
