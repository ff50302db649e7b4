"""``fluence sim``: run a scenario (or the short default) and show, save and plot the results."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from fluence_core import hookimpl, names
from fluence_core.cli.base import console
from fluence_core.sim import DEFAULT_SCENARIO, available_scenarios, load_scenario
from fluence_core.sim.experiments import run_scenario
from fluence_core.sim.report import plot, print_results, write_json


def sim_command(
    scenario: Path | None = typer.Argument(
        None, help="Scenario YAML (default: a short built-in one)."),
    seed: int | None = typer.Option(None, "--seed", help="Override the scenario's seed."),
    repeats: int | None = typer.Option(
        None, "--repeats", min=1, help="Override the scenario's repeats."),
    output: Path = typer.Option(
        Path("sim-results"), "--output", "-o", help="Directory for the JSON and PNG."),
    list_: bool = typer.Option(False, "--list", help="List the shipped scenarios and exit."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip the PNG."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show the scheduler's and sidecar's log."),
) -> None:
    """Simulate Fluence against kube-scheduler-like baselines on an in-memory cluster."""
    if list_:
        for name, path, description in available_scenarios():
            console.print(f"[bold]{name}[/]  {path}\n    {description}", highlight=False)
        return
    logging.getLogger(names.LOGGER_NAME).setLevel(logging.INFO if verbose else logging.WARNING)
    chosen = load_scenario(scenario or DEFAULT_SCENARIO)
    updates: dict[str, Any] = {}
    if seed is not None:
        updates["seed"] = seed
    if repeats is not None:
        updates["repeats"] = repeats
    chosen = chosen.model_copy(update=updates)
    console.print(f"[bold]fluence sim[/] {chosen.name} ({chosen.experiment}, seed {chosen.seed}): "
                  f"{chosen.description}", highlight=False)
    started = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("simulating", total=None)
        results = run_scenario(
            chosen,
            progress=lambda label: bar.update(task, advance=1, description=f"simulating {label}"),
            on_plan=lambda total: bar.update(task, total=total))
    elapsed = time.perf_counter() - started
    print_results(results, console)
    perf = results["performance"]
    console.print(f"{perf['runs']} runs, {perf['pods_placed']:,} pods placed, "
                  f"{perf['virtual_s']:,.0f} virtual s in {elapsed:.1f} s wall "
                  f"({perf['sim_pods_per_s']:,.0f} simulated pods/s)", highlight=False)
    path = write_json(results, output / f"{chosen.name}.json")
    console.print(f"results: {path}", highlight=False)
    if not no_plot:
        picture = plot(results, output / f"{chosen.name}.png")
        if picture is None:
            console.print("[yellow]matplotlib is not installed: no plot[/]")
        else:
            console.print(f"plot:    {picture}", highlight=False)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("sim")(sim_command)
