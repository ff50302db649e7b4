"""``fluence select``: rank a type's backends by policy and pin the best on a manifest."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from fluence_core import hookimpl
from fluence_core.cli.base import settings as current_settings
from fluence_core.cli.base import warn
from fluence_core.errors import FluenceError

_POLICY_HELP = ("min-cost|min-queue|max-qubits, online-only, max-cost=X, max-queue=N, "
                "min-qubits=N (comma-separated).")


def select_command(
    manifest: Path | None = typer.Argument(
        None, help="Pod or workload manifest to write the choice onto."),
    resource_type: str = typer.Option(
        "qpu", "--type", help="The virtual type to choose a backend of."),
    policy: str = typer.Option("min-cost", "--policy", help=_POLICY_HELP),
    resources: Path | None = typer.Option(
        None, "--resources", help="resources.yaml (default: $FLUENCE_RESOURCES)."),
    prices: Path | None = typer.Option(
        None, "--prices", help="A fixture of backend figures instead of asking the providers."),
    shots: int = typer.Option(
        1000, "--shots", min=1, help="Shots per task, for the cost estimate."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Write the manifest here (default: stdout)."),
) -> None:
    """Rank the backends of a type by policy and pin the best on a manifest (require-backend)."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.resource_config import load_resource_config
    from fluence_core.runtime import select
    from fluence_core.runtime.provider import collect_providers

    settings = current_settings()
    config = load_resource_config(resources or settings.resources)
    chosen_policy = select.Policy.parse(policy)
    fixture = select.load_price_fixture(prices) if prices else None
    providers = [] if fixture is not None else collect_providers(get_plugin_manager(settings))
    candidates = select.gather(config, resource_type, providers, fixture, warn=warn)
    if not candidates:
        raise FluenceError(f"{config.source}: no backend serves type {resource_type!r}")
    selection = select.rank(candidates, chosen_policy, shots, resource_type)
    sys.stderr.write(select.as_json(selection) + "\n")
    if selection.chosen is None:
        raise FluenceError("no backend passes the policy (see the candidates above)")
    if manifest is None:
        typer.echo(selection.chosen.backend.name)
        return
    text = select.select_into_manifest(manifest.read_text(), selection)
    if output:
        output.write_text(text)
    else:
        typer.echo(text, nl=False)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("select")(select_command)
