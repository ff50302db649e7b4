"""``fluence plan``: the jobspecs a group of pods produces and where it would be placed.

With topology levels it also explains the level and domain: what the group states (its
pods' annotations, or a PodGroup in the same file), the levels tried in turn, and for the
level that held it, the domains that could by their free totals, tightest first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fluence_core import hookimpl
from fluence_core.cli.base import console, settings
from fluence_core.cli.graph import NodesOption, ResourcesOption, build_graph
from fluence_core.errors import FluenceError, TopologyError
from fluence_core.graph import Domain, ResourceGraph
from fluence_core.matcher.jobspec import group_jobspecs
from fluence_core.kube.manifests import read_objects
from fluence_core.matcher.domains import Room, best_fit, need, rooms
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_group
from fluence_core.matcher.pooled import pooled
from fluence_core.models import Group, PodRequest
from fluence_core.plugins import get_plugin_manager
from fluence_core.stated_topology import read_constraint
from fluence_core.topology import attempts, label_keys


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
    pod_groups = [o for o in read_objects(pods) if o.get("kind") == "PodGroup"]
    constraint = read_constraint(pod_groups[0] if pod_groups else None,
                                 read_objects(pods, "Pod"))
    group = Group(group_name, tuple(requests), requests[0].namespace, constraint)
    matcher = get_plugin_manager(current).hook.fluence_matcher(settings=current, graph=built)
    try:
        specs = group_jobspecs(group, built, level=_first_level(group, built))
    except ValueError as failure:
        raise FluenceError(f"{pods}: {failure}") from None
    for spec in specs:
        console.print(f"[bold]{spec.kind} jobspec[/]")
        console.print(spec.to_json(), highlight=False, soft_wrap=True)
    if matcher is None:
        console.print("[yellow]no matcher available[/]: jobspecs only, no placement")
        return
    before = {level: rooms(built, None, level) for level in range(len(built.levels))}
    try:
        result = match_group(group, built, pooled(matcher, built))
    except ValueError as failure:
        raise FluenceError(f"{pods}: {failure}") from None
    if built.levels or group.topology.stated:
        for line in explain_topology(group, built, before, result):
            console.print(line, highlight=False)
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
    if result.slices:
        slices = Table(title="Slices (each inside one domain of every slice layer)")
        for column in ("slice", "domains", "pods", "nodes"):
            slices.add_column(column)
        for placed in result.slices:
            held_on = sorted({result.placements[key].node or "-" for key in placed.pods})
            slices.add_row(str(placed.index), ", ".join(placed.domains),
                           ", ".join(placed.pods), ", ".join(held_on))
        console.print(slices)


def _first_level(group: Group, graph: ResourceGraph) -> int | None:
    """The topology level the group's jobspecs are first sent at (None: none, or unreadable)."""
    try:
        return attempts(graph.levels, group.topology)[0]
    except TopologyError:
        return None


def explain_topology(group: Group, graph: ResourceGraph, before: dict[int, dict[Domain, Room]],
                     result: GroupMatch | GroupMiss) -> list[str]:
    """Why the group went where it did, level by level (``before``: each level's rooms
    before the match)."""
    levels = graph.levels
    stated = group.topology
    lines = ["[bold]Topology[/]: levels " + (" > ".join(f"{lv.type} ({lv.label})"
                                                      for lv in levels) or "none configured")]
    if stated.error:
        return lines + [f"  the group's constraint cannot be read: {stated.error}"]
    said = ", ".join(part for part in (
        f"required {', '.join(stated.required)}" if stated.required else "",
        f"preferred {', '.join(stated.preferred)}" if stated.preferred else "",
        "unconstrained" if stated.unconstrained else "",
        "slices " + " > ".join(f"{layer.size} pods per {layer.key}" for layer in stated.slices)
        if stated.slices else "",
        f"group of PodSets {stated.podset_group} (its gangs share one domain; the pods here "
        "are matched as the whole group)" if stated.podset_group else "") if part)
    lines.append(f"  the group states: {said} ({stated.source})" if said else
                 "  the group states nothing: the smallest domain that holds it, else anywhere")
    try:
        tries = attempts(levels, stated)
        outside = label_keys(levels, stated)
    except TopologyError as error:
        return lines + [f"  {error}"]
    if outside:
        kept = "inside one domain of" if outside.required else "preferably inside one domain of"
        lines.append(f"  {kept} node label {', '.join(outside.required or outside.preferred)}"
                     " (no configured level: a node label, outside the hierarchy)")
    lines.append("  levels tried in turn: " + ", ".join(
        levels[t].type if t is not None else "anywhere" for t in tries))
    cores, gpus, _ = need(group)
    chosen = result.level if isinstance(result, GroupMatch) else None
    for level in tries:
        if level is None:
            break
        kind = levels[level].type
        fitting = best_fit(before[level], group)
        if level != chosen:
            widest = max((r.free_cores for r in before[level].values()), default=0)
            lines.append(f"  one {kind}: no {kind} held it (needs {cores} cores"
                         + (f", {gpus} GPUs" if gpus else "")
                         + f"; the most free in one {kind} is {widest} cores)"
                         + (f"; {len(fitting)} had the totals but not the fit" if fitting else ""))
            continue
        nodes = [p.node for p in result.placements.values() if p.node] if isinstance(
            result, GroupMatch) else []
        domain = graph.common_domain(nodes)[: level + 1]
        ranked = ", ".join(f"{'/'.join(d)} ({before[level][d].free_cores} cores free)"
                           for d in fitting[:5])
        lines.append(f"  one {kind}: placed in {kind} {'/'.join(domain)}; best fit, the {kind}s "
                     f"that could hold {cores} cores, tightest first: {ranked}"
                     + (" ..." if len(fitting) > 5 else ""))
        break
    if isinstance(result, GroupMatch) and chosen is None and levels and not outside.required:
        lines.append("  placed without a domain (no level held it whole)")
    if stated.slices and isinstance(result, GroupMatch):
        lines.append(f"  {len(result.slices)} slices placed, each inside one domain of "
                     + " > ".join(layer.key for layer in stated.slices))
    return lines


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("plan")(plan)
