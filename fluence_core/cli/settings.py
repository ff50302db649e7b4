"""``fluence settings``: every ``FLUENCE_*`` variable, the core's and each plugin's own,
with its value, default and meaning."""

from __future__ import annotations

import typer
from rich.table import Table

from fluence_core import hookimpl
from fluence_core.cli.base import console, settings
from fluence_core.plugins import get_plugin_manager, plugin_settings
from fluence_core.settings import setting_rows


def show_settings() -> None:
    """List every FLUENCE_* setting, the core's and each plugin's: value, default, who reads
    it (settings the sidecar and the scout read reach their pod through the webhook), meaning."""
    current = settings()
    instances = [current] + [cls.load() for cls in plugin_settings(get_plugin_manager(current))]
    table = Table(title="Fluence settings (environment variables)")
    for column in ("variable", "value", "default", "read by", "meaning"):
        table.add_column(column)
    for instance in instances:
        plugin = instance is not current
        for row in setting_rows(instance):
            readers = ", ".join(row.read_by) or ("its plugin" if plugin else "")
            table.add_row(row.variable, _plain(row.value), _plain(row.default), readers,
                          row.meaning)
    console.print(table)


def _plain(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(empty)"
    if value is None:
        return "(unset)"
    return str(getattr(value, "value", value))


@hookimpl
def fluence_cli(app: typer.Typer) -> None:
    app.command("settings")(show_settings)
