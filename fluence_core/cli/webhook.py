"""``fluence webhook``: serve the mutating admission webhook."""

from __future__ import annotations

from typing import Any

import typer

from fluence_core import hookimpl
from fluence_core.cli.base import settings


def webhook(
    match_conditions: bool = typer.Option(
        False, "--match-conditions",
        help="Print the pod webhook's matchConditions the installed handlers declare (YAML, "
             "what the webhook publishes at start) and exit: for a configuration the webhook "
             "may not patch."),
) -> None:
    """Serve the mutating admission webhook (HTTPS, AdmissionReview v1) until SIGTERM."""
    if match_conditions:
        import yaml

        from fluence_core.plugins import get_plugin_manager
        from fluence_core.webhook import build_service

        chosen = settings()
        service = build_service(chosen, get_plugin_manager(chosen), None)
        typer.echo(yaml.safe_dump({"matchConditions": service.match_conditions},
                                  sort_keys=False, width=100), nl=False)
        return
    from fluence_core.webhook.main import run

    run(settings())


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("webhook")(webhook)
