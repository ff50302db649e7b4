"""The plugin Fluence loads (entry point ``admission``): its settings and two hooks.

Nothing here is process-wide. Each admission service (the webhook's, or one
``fluence sim`` run's) gets an :class:`AdmissionControl` of its own, over the
cluster and the clock that service injects through the context, kept in the
service's state for the next request.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_admission.control import AdmissionControl, MarkHandler
from fluence_admission.settings import AdmissionSettings
from fluence_core.api import (
    AdmissionContext,
    Handler,
    PluginSettings,
    Settings,
    SettingsError,
    Switch,
    conditions,
    hookimpl,
    judges,
    logger,
)

STATE_KEY = "fluence-admission/control"
"""Where a service keeps its :class:`AdmissionControl`."""


@hookimpl
def fluence_settings() -> list[type[PluginSettings]]:
    return [AdmissionSettings]


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Handler]:
    admission = AdmissionSettings.load()  # the webhook calls this once, at start: fail loudly
    logger.info("admission control %s (reserve %d cores)",
                admission.control.value, admission.reserve_cores)
    return [MarkHandler()]


@hookimpl
@judges(conditions.is_quantum())  # AdmissionControl.admit judges quantum pods only
def fluence_admit(pod: Mapping[str, Any], ctx: AdmissionContext) -> str | None:
    cluster = ctx.cluster
    if cluster is None:
        return None  # a webhook with no cluster connection has no budget to judge by
    control = ctx.state.get(
        STATE_KEY, lambda: AdmissionControl(cluster, AdmissionSettings.load(), clock=ctx.clock))
    return control.admit(pod, ctx)


def plugin_status() -> str:
    try:
        settings = AdmissionSettings.load()
    except SettingsError as error:
        return f"misconfigured: {error}"
    return "loaded" if settings.control == Switch.ON else "off (FLUENCE_ADMISSION_CONTROL=off)"
