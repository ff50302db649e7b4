"""Registers the Fluxion matcher; it wins over the embedded one when its library loads."""

from __future__ import annotations

from fluence_core.api import Matcher, PluginSettings, ResourceGraph, Settings, hookimpl, logger

from fluence_fluxion import binding
from fluence_fluxion.binding import Library
from fluence_fluxion.settings import FluxionSettings


def _library(settings: FluxionSettings) -> tuple[Library | None, str]:
    """The library FLUENCE_FLUXION_LIB names, else one where flux-sched installs itself."""
    setting = settings.lib or binding.installed_library()
    if setting is None:
        return None, ("inactive: FLUENCE_FLUXION_LIB is not set and no libreapi_cli.so is under "
                      f"{', '.join(binding.PREFIXES)} (embedded matcher in charge)")
    from fluence_fluxion.matcher import load_library

    try:
        library = load_library(str(setting))
    except OSError as error:
        return None, f"inactive: cannot load {setting}: {error}"
    return library, f"active: {library.path}"


def plugin_status() -> str:
    """What ``fluence plugins`` shows: whether the library loads, and if not, why."""
    try:
        return _library(FluxionSettings.load())[1]
    except Exception as error:  # a bad setting is reported where settings are read
        return f"inactive: {error}"


@hookimpl
def fluence_settings() -> list[type[PluginSettings]]:
    return [FluxionSettings]


@hookimpl
def fluence_matcher(settings: Settings, graph: ResourceGraph) -> Matcher | None:
    own = FluxionSettings.load()
    library, status = _library(own)
    if library is None:
        logger.info("fluxion plugin %s", status)
        return None
    from fluence_fluxion.matcher import FluxionMatcher

    logger.info("fluxion plugin %s", status)
    return FluxionMatcher(graph, settings.graph.match_policy, library, numa=own.numa)
