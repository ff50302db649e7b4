"""``fluence settings``: every ``FLUENCE_*`` variable, its value, default and meaning."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from fluence_core import hookimpl, names
from fluence_core.cli.base import console, settings
from fluence_core.settings import Settings


def show_settings() -> None:
    """List every FLUENCE_* setting: its current value, default and meaning."""
    current = settings()
    table = Table(title="Fluence settings (environment variables)")
    for column in ("variable", "value", "default", "meaning"):
        table.add_column(column)
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        table.add_row(f"{names.SETTINGS_ENV_PREFIX}{name.upper()}", _plain(getattr(current, name)),
                      _plain(default), field.description or "")
    console.print(table)


def _plain(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(empty)"
    if value is None:
        return "(unset)"
    return str(getattr(value, "value", value))


@hookimpl
def fluence_cli(app: Any) -> None:
    app.command("settings")(show_settings)
