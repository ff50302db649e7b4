"""``fluence sidecar``: the scout's sidecar, which has the workers released at the right
moment."""

from __future__ import annotations

from typing import Any

import typer

from fluence_core import hookimpl
from fluence_core.cli.base import settings as current_settings


def sidecar_command(
    observe_only: bool | None = typer.Option(
        None, "--observe-only/--ungate",
        help="Record the queue series only (default: $FLUENCE_OBSERVE_ONLY)."),
) -> None:
    """Watch the scout's quantum task and have Fluence release its workers when it is about
    to run (reports over HTTPS: the sidecar holds no Kubernetes rights)."""
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.runtime.provider import collect_providers
    from fluence_core.hybrid.reporter import HttpsReporter
    from fluence_core.hybrid.sidecar import sidecar_from_env

    settings = current_settings()
    if observe_only is not None:
        settings = settings.replaced(observe_only=observe_only)
    providers = collect_providers(get_plugin_manager(settings))

    def reporter() -> HttpsReporter:
        return HttpsReporter.from_settings(settings)

    result = sidecar_from_env(settings, reporter, providers).run()
    raise typer.Exit(code=result.exit_code)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("sidecar")(sidecar_command)
