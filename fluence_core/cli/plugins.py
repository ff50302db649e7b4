"""``fluence plugins``: which plugins loaded, from where, implementing what."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from fluence_core import hookimpl
from fluence_core.cli.base import console, settings
from fluence_core.errors import FluenceError
from fluence_core.plugins import get_plugin_manager


def plugins(
    check: bool = typer.Option(
        False, "--check",
        help="Exit 2 unless every plugin not disabled loaded and none calls itself inactive."),
) -> None:
    """List the plugins that loaded: name, distribution, version, hooks implemented."""
    manager = get_plugin_manager(settings())
    table = Table(title="Fluence plugins")
    for column in ("name", "distribution", "version", "hooks", "status"):
        table.add_column(column)
    for info in manager.infos.values():
        table.add_row(info.name, info.distribution, info.version, ", ".join(info.hooks),
                      info.status)
    console.print(table)
    if check:
        broken = [f"{info.name} ({info.status})" for info in manager.infos.values()
                  if info.status.startswith(("failed", "inactive"))]
        if broken:
            raise FluenceError("plugins not working: " + "; ".join(broken))


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("plugins")(plugins)
