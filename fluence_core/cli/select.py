"""``fluence select``: rank a type's backends by policy and pin the best on a manifest.

``kubectl fluence select`` (:mod:`fluence_core.cli.kubectl`) is the same command
with Fluence's ConfigMap as its default source of figures; ``fluence select``
asks the providers with the user's own credentials unless told otherwise.
Sources, first given wins: ``--prices FILE``, ``--providers``, ``--configmap``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fluence_core import hookimpl, names
from fluence_core.cli.base import settings as current_settings
from fluence_core.cli.base import warn
from fluence_core.errors import FluenceError

if TYPE_CHECKING:
    from fluence_core.kube.api import ClusterAPI
    from fluence_core.resource_config import ResourceConfig

_POLICY_HELP = ("min-cost|min-queue|max-qubits, online-only, max-cost=X, max-queue=N, "
                "min-qubits=N (comma-separated).")
DEFAULT_CONFIGMAP = f"{names.FLUENCE_NAMESPACE}/{names.BACKENDS_CONFIGMAP}"

Manifest = Annotated[Path | None, typer.Argument(
    help="Pod or workload manifest to write the choice onto (its require-* pins are kept).")]
ResourceType = Annotated[str, typer.Option(
    "--type", help="The virtual type to choose a backend of.")]
PolicyText = Annotated[str, typer.Option("--policy", help=_POLICY_HELP)]
Resources = Annotated[Path | None, typer.Option(
    "--resources", help="resources.yaml (default: $FLUENCE_RESOURCES, else the scheduler's "
    "own, from the ConfigMap beside the figures' when they come from one).")]
Prices = Annotated[Path | None, typer.Option(
    "--prices", help="A file of backend figures (the ConfigMap's schema) to rank by.")]
ConfigMap = Annotated[str | None, typer.Option(
    "--configmap", help="Read the figures from Fluence's ConfigMap, [NAMESPACE/]NAME "
    f"(Fluence keeps {DEFAULT_CONFIGMAP}).")]
AskProviders = Annotated[bool, typer.Option(
    "--providers", help="Ask each backend's provider, with your own credentials.")]
Requires = Annotated[list[str] | None, typer.Option(
    "--require", help="ATTRIBUTE=VALUE pin (repeatable), besides the manifest's own.")]
Shots = Annotated[int, typer.Option(
    "--shots", min=1, help="Shots per task, for the cost estimate.")]
Output = Annotated[Path | None, typer.Option(
    "-o", "--output", help="Write the manifest here (default: stdout).")]


def cluster_resources(cluster: ClusterAPI, namespace: str) -> ResourceConfig:
    """The resources config the scheduler runs with, from its ConfigMap in ``namespace``."""
    from fluence_core.kube.api import CONFIGMAPS
    from fluence_core.resource_config import parse_resource_config

    where = f"configmap {namespace}/{names.RESOURCES_CONFIGMAP}"
    found = cluster.get(CONFIGMAPS, names.RESOURCES_CONFIGMAP, namespace)
    text = ((found or {}).get("data") or {}).get(names.RESOURCES_CONFIGMAP_KEY)
    if text is None:
        raise FluenceError(f"{where} has no key {names.RESOURCES_CONFIGMAP_KEY} "
                           "(pass --resources FILE or set FLUENCE_RESOURCES)")
    return parse_resource_config(str(text), f"{where} key {names.RESOURCES_CONFIGMAP_KEY}")


def run_select(manifest: Path | None, resource_type: str, policy: str, resources: Path | None,
               prices: Path | None, configmap: str | None, ask_providers: bool,
               requires: list[str], shots: int, output: Path | None) -> None:
    """Gather the figures once, then choose for each pod template under its own pins."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.resource_config import load_resource_config
    from fluence_core.runtime import figures, select
    from fluence_core.runtime.provider import collect_providers

    settings = current_settings()
    chosen_policy = select.Policy.parse(policy)
    extra = select.parse_pins(requires)
    ref = figures.ConfigMapRef.parse(configmap) if configmap is not None else None
    resources = resources or settings.graph.resources
    figures_from_cluster = prices is None and not ask_providers and ref is not None
    cluster = None
    if ref is not None and (figures_from_cluster or resources is None):
        from fluence_core.cli.up import connect

        cluster = connect(settings)
    if cluster is not None and ref is not None and resources is None:
        config = cluster_resources(cluster, ref.namespace)
    else:
        config = load_resource_config(resources)
    if not select.backends_of_type(config, resource_type):
        raise FluenceError(f"{config.source}: no backend serves type {resource_type!r}")
    fixture = None
    if prices is not None:
        fixture = select.load_price_fixture(prices)
    elif figures_from_cluster and cluster is not None and ref is not None:
        fixture = figures.read_configmap(cluster, ref)
    if fixture is not None:
        for backend, _ in select.backends_of_type(config, resource_type):
            if backend.name not in fixture:
                where = prices if prices is not None else ref
                warn(f"{where}: no figures for {backend.name} (ranked on the resources "
                     "config's alone)")
    providers = [] if fixture is not None else collect_providers(get_plugin_manager(settings))
    # Providers are asked only about backends that some pin set could still choose.
    out_everywhere = select.pinned_out(config, resource_type, extra)
    candidates = select.gather(config, resource_type, providers, fixture, warn=warn,
                               skip=out_everywhere)

    def choose(pins: select.Pins) -> select.Selection:
        clash = {k: (v, extra[k]) for k, v in pins.items() if k in extra and extra[k] != v}
        if clash:
            key, (own, asked) = next(iter(clash.items()))
            raise FluenceError(f"--require {key}={asked} contradicts the manifest's "
                               f"require-{key}: {own}")
        merged = {**extra, **pins}
        selection = select.rank(candidates, chosen_policy, shots, resource_type,
                                select.pinned_out(config, resource_type, merged))
        sys.stderr.write(select.as_json(selection) + "\n")
        return selection

    if manifest is None:
        selection = choose({})
        if selection.chosen is None:
            raise FluenceError("no backend passes the pins and the policy (see the candidates "
                               "above)")
        typer.echo(selection.chosen.backend.name)
        return
    text = select.select_into_manifest(manifest.read_text(), choose)
    if output:
        output.write_text(text)
    else:
        typer.echo(text, nl=False)


def select_command_with(default_configmap: str | None, figures: str) -> Callable[..., None]:
    """The ``select`` command, reading figures from ``default_configmap`` unless told otherwise.

    ``fluence select`` and ``kubectl fluence select`` differ only in that default
    (and the help's ``figures`` sentence saying where figures come from), so both
    are made here: Typer reads the options from this one signature.
    """

    def command(
        manifest: Manifest = None,
        resource_type: ResourceType = "qpu",
        policy: PolicyText = "min-cost",
        resources: Resources = None,
        prices: Prices = None,
        configmap: ConfigMap = default_configmap,
        providers: AskProviders = False,
        require: Requires = None,
        shots: Shots = 1000,
        output: Output = None,
    ) -> None:
        run_select(manifest, resource_type, policy, resources, prices, configmap, providers,
                   list(require or ()), shots, output)

    command.__doc__ = ("Rank the backends of a type by policy and pin the best on a manifest "
                       "(require-backend), keeping every require-* pin it already has. "
                       f"Figures: {figures}.")
    return command


select_command = select_command_with(None, "the providers, or --prices / --configmap")
kubectl_select_command = select_command_with(
    DEFAULT_CONFIGMAP, "Fluence's ConfigMap, or --prices / --providers")


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("select")(select_command)
