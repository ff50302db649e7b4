"""The plugin manager: entry points of group ``fluence``, a block-list, strict checks.

Fluence's built-ins are registered through the very same entry-point group as
third-party plugins, so every plugin is a peer. After loading,
``check_pending()`` makes a misspelled hook implementation fail loudly instead
of never being called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Iterable

import pluggy

from fluence_core import hookspecs, names
from fluence_core.errors import FluenceError
from fluence_core.log import logger
from fluence_core.settings import PluginSettings, Settings


@dataclass
class PluginInfo:
    """What ``fluence plugins`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    hooks: list[str] = field(default_factory=list)
    status: str = "loaded"


class FluencePluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers where each plugin came from."""

    def __init__(self) -> None:
        super().__init__(names.ENTRY_POINT_GROUP)
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}

    def register_plugin(
        self, plugin: Any, name: str, distribution: str = "", version: str = ""
    ) -> None:
        try:
            self.register(plugin, name=name)
        except pluggy.PluginValidationError as error:
            raise FluenceError(f"plugin {name}: {error}") from None
        hooks = sorted(
            caller.name for caller in self.get_hookcallers(plugin) or []
        )
        status_of = getattr(plugin, "plugin_status", None)
        status = status_of() if callable(status_of) else "loaded"
        self.infos[name] = PluginInfo(name, distribution, version, hooks, status)


def _entry_points() -> Iterable[EntryPoint]:
    return entry_points(group=names.ENTRY_POINT_GROUP)


def get_plugin_manager(
    settings: Settings, extra_plugins: Iterable[tuple[str, ModuleType | object]] = ()
) -> FluencePluginManager:
    """Load every ``fluence`` entry point not block-listed, plus ``extra_plugins``.

    A plugin that fails to import is reported in :attr:`FluencePluginManager.infos`
    with the error rather than stopping Fluence; a hook implementation with no
    matching spec raises :class:`FluenceError`.
    """
    manager = FluencePluginManager()
    blocked = set(settings.disable_plugins)
    for entry_point in sorted(_entry_points(), key=lambda ep: ep.name):
        dist = entry_point.dist
        dist_name = dist.name if dist else "?"
        dist_version = dist.version if dist else "?"
        if entry_point.name in blocked:
            logger.info("plugin %s is disabled by FLUENCE_DISABLE_PLUGINS", entry_point.name)
            manager.infos[entry_point.name] = PluginInfo(
                entry_point.name, dist_name, dist_version, status="disabled"
            )
            continue
        try:
            plugin = entry_point.load()
        except Exception as error:  # a broken plugin must not take the scheduler down
            logger.error("plugin %s failed to load: %s", entry_point.name, error)
            manager.infos[entry_point.name] = PluginInfo(
                entry_point.name, dist_name, dist_version, status=f"failed to load: {error}"
            )
            continue
        manager.register_plugin(plugin, entry_point.name, dist_name, dist_version)
    for name, plugin in extra_plugins:
        if name not in blocked:
            manager.register_plugin(plugin, name, "(in process)", "")
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as error:
        raise FluenceError(f"a plugin implements an unknown hook: {error}") from None
    return manager


def plugin_settings(manager: FluencePluginManager) -> list[type[PluginSettings]]:
    """Every settings class the plugins contribute (``fluence_settings``), in plugin order.

    Anything else than a :class:`PluginSettings` subclass is a :class:`FluenceError`
    naming it, and so is a second class with the same env prefix.
    """
    found: list[type[PluginSettings]] = []
    prefixes: dict[str, str] = {}
    for contributed in manager.hook.fluence_settings():
        for cls in contributed or ():
            if not (isinstance(cls, type) and issubclass(cls, PluginSettings)):
                raise FluenceError(f"fluence_settings returned {cls!r}, not a PluginSettings class")
            prefix = str(cls.model_config.get("env_prefix") or "").upper()
            if (
                not prefix.startswith(names.SETTINGS_ENV_PREFIX)
                or prefix == names.SETTINGS_ENV_PREFIX
            ):
                raise FluenceError(f"{cls.__name__} needs an env_prefix of its own under "
                                   f"{names.SETTINGS_ENV_PREFIX} (it has {prefix!r})")
            if prefix in prefixes:
                raise FluenceError(
                    f"{cls.__name__} and {prefixes[prefix]} share the prefix {prefix}"
                )
            prefixes[prefix] = cls.__name__
            found.append(cls)
    return found
