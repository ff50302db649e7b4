"""``fluence plugins``: which plugins loaded, from where, implementing what."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from fluence_core import hookimpl
from fluence_core.cli.base import console, settings
from fluence_core.plugins import get_plugin_manager


def plugins() -> None:
    """List the plugins that loaded: name, distribution, version, hooks implemented."""
    manager = get_plugin_manager(settings())
    table = Table(title="Fluence plugins")
    for column in ("name", "distribution", "version", "hooks", "status"):
        table.add_column(column)
    for info in manager.infos.values():
        table.add_row(info.name, info.distribution, info.version, ", ".join(info.hooks),
                      info.status)
    console.print(table)


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("plugins")(plugins)
