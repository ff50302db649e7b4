"""The plugin Fluence loads (entry point ``flux``): one webhook handler."""

from __future__ import annotations

from typing import Any

from fluence_core.api import Settings, hookimpl
from fluence_flux.handler import FluxHandler
from fluence_flux.settings import FluxSettings


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [FluxHandler(FluxSettings())]
