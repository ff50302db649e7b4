"""``fluence webhook``: serve the mutating admission webhook."""

from __future__ import annotations

from typing import Any

from fluence_core import hookimpl
from fluence_core.cli.base import settings


def webhook() -> None:
    """Serve the mutating admission webhook (HTTPS, AdmissionReview v1) until SIGTERM."""
    from fluence_core.webhook.main import run

    run(settings())


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("webhook")(webhook)
