"""Add every plugin's commands to the app, reporting (never hiding) what goes wrong.

Commands are chosen before the command line is parsed, so a bad ``FLUENCE_*``
variable cannot be allowed to hide them: plugins are selected with the bad
variables at their defaults, and the command the user ran then names the bad
variable (see :mod:`.base`). A plugin that fails to import, raises while adding
its commands, or takes a name another plugin already has, is reported on stderr
with its name; the other plugins' commands still load.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import ValidationError

from fluence_core.cli.base import warn
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.settings import Settings, SettingsVariables

_LOADED = "_fluence_commands_loaded"


def selection_settings() -> Settings:
    """The settings that choose plugins, with any invalid variable left at its default."""
    try:
        return Settings.of(SettingsVariables())
    except ValidationError as error:
        bad = {str(problem["loc"][0]) for problem in error.errors() if problem["loc"]}
        fields = SettingsVariables.model_fields
        defaults: dict[str, Any] = {
            name: fields[name].get_default(call_default_factory=True)
            for name in bad if name in fields
        }
        return Settings(**defaults)


def _command_names(app: typer.Typer) -> list[str]:
    return [
        info.name or (info.callback.__name__ if info.callback else "?")
        for info in app.registered_commands
    ]


def add_commands(app: typer.Typer, manager: FluencePluginManager) -> None:
    """Call each plugin's ``fluence_cli`` on ``app``, one plugin at a time, naming failures."""
    for info in manager.infos.values():
        if info.status.startswith("failed"):
            warn(f"plugin {info.name} ({info.distribution}) {info.status}; "
                 "its commands are missing")
    owners: dict[str, str] = {name: "fluence" for name in _command_names(app)}
    for implementation in manager.hook.fluence_cli.get_hookimpls():
        plugin = implementation.plugin_name
        before = len(app.registered_commands)
        try:
            implementation.function(app=app)
        except Exception as failure:  # a third party's bug must not hide everyone's commands
            del app.registered_commands[before:]
            warn(f"plugin {plugin} failed to add its commands: {type(failure).__name__}: {failure}")
            continue
        for name in _command_names(app)[before:]:
            if name in owners:
                warn(f"plugin {plugin} adds command {name!r}, which plugin {owners[name]} "
                     "already added; the later one wins")
            owners[name] = plugin


def load_plugin_commands(app: typer.Typer | None = None) -> None:
    """Add the commands of every enabled plugin to ``app`` (default: the ``fluence`` app), once."""
    if app is None:
        from fluence_core.cli import app as fluence_app

        app = fluence_app
    if getattr(app, _LOADED, False):
        return
    setattr(app, _LOADED, True)
    add_commands(app, get_plugin_manager(selection_settings()))
