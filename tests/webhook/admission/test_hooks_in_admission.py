"""The webhook's hooks, as a plugin meets them: through a review answered by the service the
webhook builds from the plugins (``build_service``), beside every installed handler.

``fluence_webhook_handlers`` contributes handlers whose patches reach the answer;
``fluence_admit`` refuses a pod before any handler has changed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook_helpers import admit, pod

from fluence_core import hookimpl
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import Settings
from fluence_core.webhook import build_service
from fluence_core.webhook.admission.base import AdmissionContext, Handler
from fluence_core.webhook.admission.review import AdmissionService

LABEL = "example.org/seen-by"


class Labels(Handler):
    """A third party's pod handler: adds ``LABEL`` (or appends its name to it)."""

    match_condition = "true"

    def __init__(self, name: str, order: int) -> None:
        self.name = name
        self.order = order

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return True

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> list[Any]:
        seen = (pod["metadata"].get("labels") or {}).get(LABEL)
        if seen is not None and self.name in seen.split("."):
            return []
        value = self.name if seen is None else f"{seen}.{self.name}"
        return [{"op": "add", "path": f"/metadata/labels/{LABEL.replace('/', '~1')}",
                 "value": value}]


class Contributes:
    def __init__(self, *handlers: Handler) -> None:
        self.handlers = handlers

    @hookimpl
    def fluence_webhook_handlers(self, settings: Settings) -> list[Handler]:
        return list(self.handlers)


class Refuses:
    def __init__(self, reason: str | None) -> None:
        self.reason = reason
        self.asked: list[str] = []

    @hookimpl
    def fluence_admit(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> str | None:
        self.asked.append(pod["metadata"]["name"])
        return self.reason


def service_with(settings: Settings, cluster: Any, *plugins: object) -> AdmissionService:
    manager = get_plugin_manager(settings, extra_plugins=[(f"p{i}", p) for i, p in
                                                          enumerate(plugins)])
    return build_service(settings, manager, cluster)


def test_contributed_handlers_patch_the_pod_in_their_order_beside_the_installed_ones(
        settings, cluster) -> None:
    service = service_with(settings, cluster, Contributes(Labels("late", 900)),
                           Contributes(Labels("early", 1)))
    assert {"early", "late", "gang"} <= {h.name for h in service.handlers}
    response, patched = admit(service, pod("p"))
    assert response["allowed"] is True
    assert patched["metadata"]["labels"][LABEL] == "early.late"


def test_the_first_refusal_denies_the_pod_before_any_handler_changes_it(
        settings, cluster) -> None:
    admits, refuses = Refuses(None), Refuses("over the team's quota")
    service = service_with(settings, cluster, Contributes(Labels("mine", 1)), admits, refuses)
    response, patched = admit(service, pod("p"))
    assert response["allowed"] is False
    assert "over the team's quota" in response["status"]["message"]
    assert "patch" not in response and LABEL not in patched["metadata"]["labels"]
    assert refuses.asked == ["p"]


def test_a_pod_no_plugin_refuses_is_admitted_and_mutated(settings, cluster) -> None:
    admits = Refuses(None)
    service = service_with(settings, cluster, Contributes(Labels("mine", 1)), admits)
    response, patched = admit(service, pod("p"))
    assert response["allowed"] is True and admits.asked == ["p"]
    assert patched["metadata"]["labels"][LABEL] == "mine"
