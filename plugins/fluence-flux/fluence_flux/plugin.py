"""The plugin Fluence loads (entry point ``flux``): one webhook handler."""

from __future__ import annotations

from fluence_core.api import Handler, PluginSettings, Settings, hookimpl
from fluence_flux.handler import FluxHandler
from fluence_flux.settings import FluxSettings


@hookimpl
def fluence_settings() -> list[type[PluginSettings]]:
    return [FluxSettings]


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Handler]:
    return [FluxHandler(FluxSettings.load())]
