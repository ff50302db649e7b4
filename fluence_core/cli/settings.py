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
    it (settings the sidecar and the scout read reach their pod through the webhook), meaning.
    On a terminal a table; piped, one tab-separated line per setting, nothing cut."""
    current = settings()
    instances = [current] + [cls.load() for cls in plugin_settings(get_plugin_manager(current))]
    columns = ("variable", "value", "default", "read by", "meaning")
    rows = []
    for instance in instances:
        plugin = instance is not current
        for row in setting_rows(instance):
            readers = ", ".join(row.read_by) or ("its plugin" if plugin else "")
            rows.append((row.variable, _plain(row.value), _plain(row.default), readers,
                         row.meaning))
    if not console.is_terminal:  # a pipe or a file: whole lines, one per setting, no table
        for line in (columns, *rows):  # a table cut names to the 80 columns it assumed
            typer.echo("\t".join(" ".join(cell.split()) for cell in line))
        return
    table = Table(title="Fluence settings (environment variables)")
    for column in columns:
        table.add_column(column)
    for cells in rows:
        table.add_row(*cells)
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
