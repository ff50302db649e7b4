"""The plugin Fluence loads (entry point ``admission``): one controller, two hooks."""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core.api import Settings, hookimpl

from fluence_admission.control import AdmissionControl, MarkHandler

CONTROL = AdmissionControl()


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    CONTROL.configure(settings)  # the webhook calls this once, at start
    return [MarkHandler(CONTROL)]


@hookimpl
def fluence_admit(pod: Mapping[str, Any], ctx: Mapping[str, Any]) -> str | None:
    return CONTROL.admit(pod, ctx)


def plugin_status() -> str:
    return "loaded" if CONTROL.enabled is not False else "off (FLUENCE_ADMISSION=off)"
