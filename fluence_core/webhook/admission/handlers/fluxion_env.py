"""Built-in handler ``fluxion-env``: tell a container what virtual resource it got.

Any container requesting ``fluxion.flux-framework.org/<type>`` gets downward-API
env ``FLUXION_BACKEND`` (annotation ``backend``) and ``FLUXION_<KEY>`` for every
attribute key of the resources config (annotation ``attr-<key>``). The
scheduler writes those annotations before binding, so they are set when the
container starts.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from fluence_core import hookimpl, names
from fluence_core.errors import FluenceError
from fluence_core.log import logger
from fluence_core.resource_config import load_resource_config
from fluence_core.settings import Settings
from fluence_core.webhook import cel
from fluence_core.webhook import pod_fields
from fluence_core.kube.patch import JsonPatch, pointer
from fluence_core.webhook.admission.base import AdmissionContext, Handler
from fluence_core.webhook.admission.env import add_env, annotation_env


class FluxionEnvHandler(Handler):
    name = "fluxion-env"
    order = 40
    match_condition = cel.asks_for_virtual()

    def __init__(self, attribute_keys: Sequence[str] = ()) -> None:
        self.attribute_keys = tuple(attribute_keys)

    def env_contract(self) -> list[tuple[str, str]]:
        contract = [(names.ENV_BACKEND, f"annotation {names.BACKEND_ANNOTATION}")]
        for key in self.attribute_keys:
            contract.append(
                (names.env_name_for_attribute(key), f"annotation {names.attr_annotation(key)}")
            )
        return contract

    def _env(self) -> list[dict[str, Any]]:
        return [
            annotation_env(variable, source.split(" ", 1)[1])
            for variable, source in self.env_contract()
        ]

    def applies(self, pod: Mapping[str, Any]) -> bool:
        return pod_fields.asks_for_virtual(pod)

    def mutate(self, pod: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        ops: JsonPatch = []
        spec = pod_fields.pod_spec(pod)
        for section in ("initContainers", "containers"):
            for index, container in enumerate(spec.get(section) or []):
                if pod_fields.virtual_requests(container):
                    ops += add_env(container, pointer("spec", section, index), self._env())
        return ops


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    keys: Sequence[str] = ()
    try:
        keys = load_resource_config(settings.graph.resources).attribute_keys
    except (
        FluenceError
    ) as error:  # the scheduler refuses to start on this; the env handler degrades
        logger.error("fluxion-env: %s; only %s is injected", error, names.ENV_BACKEND)
    return [FluxionEnvHandler(keys)]
