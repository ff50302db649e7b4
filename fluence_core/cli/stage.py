"""``fluence stage DIR``: stage the interceptor runtime for user containers (init container)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from fluence_core import hookimpl


def stage_command(
    directory: Path = typer.Argument(..., help="Directory to fill (an emptyDir on PYTHONPATH)."),
) -> None:
    """Stage the interceptor runtime and every installed provider's interceptor into DIRECTORY."""
    from fluence_core.hybrid.stage import installed_providers, stage

    manifest = stage(directory, installed_providers())
    providers = manifest["providers"]
    assert isinstance(providers, list)
    staged = ", ".join(str(e["name"]) for e in providers) or "no providers"
    typer.echo(f"staged {staged} into {directory}")


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("stage")(stage_command)
