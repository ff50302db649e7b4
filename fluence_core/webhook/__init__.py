"""The mutating admission webhook: prepares pods for Fluence before they reach the queue.

Public surface: :class:`Handler` (what a plugin contributes through
``fluence_webhook_handlers``), :class:`AdmissionContext`, :class:`AdmissionDenied`,
:func:`select_handlers`, :func:`build_service` and :class:`AdmissionService`.
The HTTPS server lives in :mod:`fluence_core.webhook.transport.server`, TLS bootstrap in
:mod:`fluence_core.webhook.transport.tls`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from fluence_core.kube.api import ClusterAPI
from fluence_core.errors import FluenceError
from fluence_core.log import logger
from fluence_core.resource_config import ResourceConfig, load_resource_config
from fluence_core.settings import Settings
from fluence_core.webhook.admission.base import (
    HANDLER_MEMBERS,
    AdmissionContext,
    AdmissionDenied,
    Handler,
    env_contract_of,
)
from fluence_core.webhook.cel import Need, judged_by
from fluence_core.webhook.controller.informer import Watched
from fluence_core.webhook.admission.review import AdmissionService
from fluence_core.webhook.controller.writer import BackgroundWriter


def select_handlers(contributed: Sequence[object], chosen: Sequence[str] = ()) -> list[Handler]:
    """The handlers to run, in order.

    With ``chosen`` empty: every contributed handler, by its ``order`` (then
    name). Otherwise exactly the named ones, in the order named; a name no
    plugin contributed is a :class:`FluenceError`, as is a duplicate name, and
    so is an object that is not a :class:`Handler` (named with what it lacks).
    """
    by_name: dict[str, Handler] = {}
    for handler in contributed:
        if not isinstance(handler, Handler):
            lacks = [member for member in HANDLER_MEMBERS if not hasattr(handler, member)]
            label = getattr(handler, "name", None) or repr(handler)
            raise FluenceError(f"webhook handler {label!r} is not a Handler: it has no {lacks} "
                               f"(subclass fluence_core.api.Handler for the optional ones)")
        if handler.name in by_name:
            raise FluenceError(f"two webhook handlers are named {handler.name!r}")
        by_name[handler.name] = handler
    if not chosen:
        return sorted(by_name.values(), key=lambda h: (h.order, h.name))
    unknown = [name for name in chosen if name not in by_name]
    if unknown:
        raise FluenceError(f"FLUENCE_WEBHOOK_HANDLERS names unknown handlers {unknown}; "
                           f"known: {sorted(by_name)}")
    if len(set(chosen)) != len(chosen):
        raise FluenceError(f"FLUENCE_WEBHOOK_HANDLERS repeats a handler: {list(chosen)}")
    return [by_name[name] for name in chosen]


def build_service(settings: Settings, manager: Any, cluster: ClusterAPI | None, *,
                  clock: Callable[[], float] = time.monotonic,
                  writer: BackgroundWriter | None = None,
                  watched: Watched | None = None) -> AdmissionService:
    """Collect the handlers from the plugins, order them and wire admission control
    (``clock`` is the one plugins see: ``fluence sim`` passes its virtual time; ``writer``
    makes PodGroups after the answer, as ``fluence webhook`` does; ``watched``, the
    informers its handlers look objects up in)."""
    by_plugin = handlers_by_plugin(manager, settings)
    handlers = select_handlers([h for _, batch in by_plugin for h in batch],
                               settings.webhook.handlers)
    try:
        config = load_resource_config(settings.graph.resources)
    except FluenceError as error:
        logger.error("webhook: %s", error)
        config = ResourceConfig()

    def admit(pod: Mapping[str, Any], ctx: AdmissionContext) -> str | None:
        result: str | None = manager.hook.fluence_admit(pod=pod, ctx=ctx)
        return result

    admit_needs = [Need(f"fluence_admit of {impl.plugin_name}", judged_by(impl.function))
                   for impl in manager.hook.fluence_admit.get_hookimpls()]
    return AdmissionService(
        settings, handlers, cluster=cluster, admit=admit, resource_config=config, clock=clock,
        writer=writer, admit_needs=admit_needs, watched=watched,
        plugins_off=plugins_left_out(by_plugin, handlers),
    )


def handlers_by_plugin(manager: Any, settings: Settings) -> list[tuple[object, list[object]]]:
    """Each plugin implementing ``fluence_webhook_handlers`` with what it contributes, so
    that what is left out of the handlers can be traced to the plugin that offered it."""
    hook = "fluence_webhook_handlers"
    plugins = [impl.plugin for impl in getattr(manager.hook, hook).get_hookimpls()]
    found: list[tuple[object, list[object]]] = []
    for plugin in plugins:
        alone = manager.subset_hook_caller(hook, remove_plugins=[p for p in plugins
                                                                 if p is not plugin])
        found.append((plugin, [h for batch in alone(settings=settings) or []
                               for h in batch or []]))
    return found


def plugins_left_out(by_plugin: Sequence[tuple[object, Sequence[object]]],
                     handlers: Sequence[Handler]) -> list[object]:
    """The plugins that offer handlers of which none runs (``FLUENCE_WEBHOOK_HANDLERS``
    leaves them all out). The webhook asks them for no routes and no loops either
    (:func:`~fluence_core.webhook.main.make_server`): the quantum handler's report route
    and orphan sweep are the quantum feature, and :func:`select_handlers` alone decides
    whether it is on. A plugin that offers no handler at all is not left out."""
    running = {id(h) for h in handlers}
    return [plugin for plugin, offered in by_plugin
            if offered and not any(id(h) in running for h in offered)]


def log_contract(service: AdmissionService) -> None:
    """Say at start which handlers run, which env variables they inject from where, and
    which pods the API server need not send (what every pod makes it send, if something)."""
    logger.info(
        "webhook handlers, in order: %s", ", ".join(h.name for h in service.handlers) or "none"
    )
    every = [need.owner for need in service.needs() if need.condition is None]
    if every:
        logger.info("webhook: every Fluence pod is sent, %s declares no match_condition",
                    " and ".join(every))
    else:
        logger.info("webhook: only the Fluence pods some handler or check needs are sent")
    for handler, variable, source in env_contract_of(service.handlers):
        logger.info("webhook env contract: %s <- %s [%s]", variable, source, handler)


__all__ = [
    "AdmissionContext", "AdmissionDenied", "AdmissionService", "BackgroundWriter", "Handler",
    "build_service", "handlers_by_plugin", "log_contract", "plugins_left_out",
    "select_handlers",
]
