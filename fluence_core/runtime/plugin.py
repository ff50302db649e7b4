"""The runtime's built-in plugin: ``fluence stage``, ``fluence sidecar``, ``fluence select``.

Registered through the ``fluence`` entry-point group like any third-party plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from fluence_core import hookimpl, log
from fluence_core.errors import FluenceError


def _fail(error: Exception) -> "typer.Exit":
    sys.stderr.write(f"error: {error}\n")
    raise typer.Exit(code=2)


def stage_command(directory: Path = typer.Argument(..., help="Directory to fill (an emptyDir on PYTHONPATH).")) -> None:
    """Stage the interceptor runtime and every installed provider's interceptor into DIRECTORY."""
    from fluence_core.runtime.stage import installed_providers, stage

    try:
        manifest = stage(directory, installed_providers())
    except FluenceError as error:
        _fail(error)
    providers = manifest["providers"]
    assert isinstance(providers, list)
    staged = ", ".join(str(e["name"]) for e in providers) or "no providers"
    typer.echo(f"staged {staged} into {directory}")


def sidecar_command(
    observe_only: Optional[bool] = typer.Option(None, "--observe-only/--ungate",
                                                help="Record the queue series only (default: $FLUENCE_OBSERVE_ONLY)."),
) -> None:
    """Watch the scout's quantum task and ungate its workers when it is about to run."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.runtime.provider import collect_providers
    from fluence_core.runtime.sidecar import sidecar_from_env
    from fluence_core.settings import load_settings

    try:
        settings = load_settings()
        log.configure(settings.log_level)
        if observe_only is not None:
            settings = settings.model_copy(update={"observe_only": observe_only})
        providers = collect_providers(get_plugin_manager(settings))
        from fluence_core.kube import KubeCluster

        def connect() -> KubeCluster:
            return KubeCluster.connect(qps=settings.kube_qps, burst=settings.kube_burst)

        result = sidecar_from_env(settings, connect, providers).run()
    except FluenceError as error:
        _fail(error)
    raise typer.Exit(code=result.exit_code)


def select_command(
    manifest: Optional[Path] = typer.Argument(None, help="Pod or workload manifest to write the choice onto."),
    resource_type: str = typer.Option("qpu", "--type", help="The virtual type to choose a backend of."),
    policy: str = typer.Option("min-cost", "--policy",
                               help="min-cost|min-queue|max-qubits, online-only, max-cost=X, max-queue=N, min-qubits=N (comma-separated)."),
    resources: Optional[Path] = typer.Option(None, "--resources", help="resources.yaml (default: $FLUENCE_RESOURCES)."),
    prices: Optional[Path] = typer.Option(None, "--prices", help="A fixture of backend figures instead of asking the providers."),
    shots: int = typer.Option(1000, "--shots", min=1, help="Shots per task, for the cost estimate."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the manifest here (default: stdout)."),
) -> None:
    """Rank the backends of a type by policy and pin the best on a manifest (require-backend)."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.resource_config import load_resource_config
    from fluence_core.runtime import select
    from fluence_core.runtime.provider import collect_providers
    from fluence_core.settings import load_settings

    try:
        settings = load_settings()
        config = load_resource_config(resources or settings.resources)
        chosen_policy = select.Policy.parse(policy)
        fixture = select.load_price_fixture(prices) if prices else None
        providers = [] if fixture is not None else collect_providers(get_plugin_manager(settings))
        candidates = select.gather(config, resource_type, providers, fixture,
                                   warn=_warn)
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
    except (FluenceError, OSError) as error:
        _fail(error)
    if output:
        output.write_text(text)
    else:
        typer.echo(text, nl=False)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("stage")(stage_command)
    app.command("sidecar")(sidecar_command)
    app.command("select")(select_command)


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
