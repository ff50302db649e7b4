"""At start the webhook writes which pods it needs into its own MutatingWebhookConfiguration.

The pod webhook's ``matchConditions`` are built from the installed handlers
(:mod:`~fluence_core.webhook.cel`), so they can only be known where the
handlers are loaded: here, once, as the caBundle is
(:mod:`~fluence_core.webhook.transport.tls`). Until then
the manifest's own condition (the scheduler name) sends every Fluence pod,
which is always safe; with a handler that declares nothing the published
conditions are that same one, so installing such a plugin widens what is sent
at the next start.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from fluence_core.kube.api import MUTATING_WEBHOOKS, ClusterAPI
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.webhook.cel import skipping


def is_pod_webhook(webhook: Mapping[str, Any]) -> bool:
    """Whether this entry sends core-group pods (and nothing else) on CREATE."""
    rules = webhook.get("rules") or []
    return bool(rules) and all(
        list(rule.get("apiGroups") or []) == [""] and list(rule.get("resources") or []) == ["pods"]
        and "CREATE" in (rule.get("operations") or []) for rule in rules)


def publish_match_conditions(cluster: ClusterAPI, config_name: str,
                             conditions: Sequence[Mapping[str, str]], *,
                             attempts: int = 5) -> int:
    """Set ``conditions`` on every pod webhook of ``config_name``; returns how many changed.

    A missing configuration is logged and left (the caller that creates it later
    restarts us, or it was never ours); a concurrent change to the list (the
    guarding ``test`` of each entry's name fails) is read again.
    """
    wanted = [dict(c) for c in conditions]
    for _ in range(attempts):
        config = cluster.get(MUTATING_WEBHOOKS, config_name)
        if config is None:
            logger.warning("webhook: MutatingWebhookConfiguration %s not found; matchConditions"
                           " not published", config_name)
            return 0
        ops: list[dict[str, Any]] = []
        for index, webhook in enumerate(config.get("webhooks") or []):
            if is_pod_webhook(webhook) and webhook.get("matchConditions") != wanted:
                ops += [{"op": "test", "path": f"/webhooks/{index}/name",
                         "value": webhook.get("name")},
                        {"op": "add", "path": f"/webhooks/{index}/matchConditions",
                         "value": wanted}]
        if not ops:
            return 0
        try:
            cluster.patch(MUTATING_WEBHOOKS, config_name, ops, patch_type="json")
        except ApiError as error:
            if error.status not in (409, 422):  # 422: a guarding test failed
                raise
            logger.info("webhook: %s changed while publishing matchConditions (%s); again",
                        config_name, error)
            continue
        logger.info("webhook: matchConditions of %d pod webhook(s) of %s: %s", len(ops) // 2,
                    config_name, "only pods a handler needs" if skipping(wanted)
                    else "every Fluence pod")
        return len(ops) // 2
    logger.warning("webhook: %s kept changing; matchConditions not published", config_name)
    return 0
