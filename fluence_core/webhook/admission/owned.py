"""Fluence's annotations are Fluence's: what the webhook strips from a pod at CREATE.

Why: a tenant could create a pod carrying
``fluence.flux-framework.org/allocation`` listing every core of two free nodes; after a
restart the scheduler would restore it as a record, bind the pod against its nodeSelector
and withhold both nodes from everyone. The keys only Fluence writes after admission
(:data:`~fluence_core.names.SCHEDULER_ONLY_ANNOTATIONS` and the ``attr-*`` and
``scout-*`` families) are therefore removed from every Fluence pod the webhook admits,
whoever sends it (a Job's pods, made by the job controller from a template the user
wrote, included), and the pods carrying one are always sent to the webhook
(:func:`condition`). Pods the webhook never sees (another scheduler's) and every later
edit are the admission policy's (``deploy/admission-policy.yaml``): it refuses, from
anyone but Fluence's ServiceAccounts, a CREATE still carrying such a key and an UPDATE
that sets, changes or removes any key Fluence owns.

The split's seal (:class:`Sealer`) is the one owned key the webhook itself writes at
admission: it is removed here too, unless it is a seal this webhook made for this very pod.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

import orjson

from fluence_core import names
from fluence_core.webhook import cel
from fluence_core.kube.patch import JsonPatch, pointer
from fluence_core.webhook.admission.base import ServiceState
from fluence_core.kube.meta import (
    annotations_of,
    controller_reference,
    labels_of,
    metadata_of,
)


def scheduler_only(key: str) -> bool:
    """Whether only Fluence writes annotation ``key``, and only after admission."""
    return key in names.SCHEDULER_ONLY_ANNOTATIONS or key.startswith(
        names.SCHEDULER_ONLY_PREFIXES)


def only_fluence_may_set(key: str) -> bool:
    """Whether annotation ``key`` is one only Fluence may set or change on a stored object."""
    return key in names.OWNED_ANNOTATIONS or key.startswith(names.SCHEDULER_ONLY_PREFIXES)


class Sealer:
    """Seals the pods the quantum split makes, and knows its own seals again.

    An admission policy sees the finished pod only, never who wrote which part: a role
    label, a gate or a priority class the split wrote looks the same as one a tenant wrote.
    The seal tells them apart. It is an HMAC, under a key drawn when the webhook starts and
    never shown, of what makes the pod the split's: its namespace, group, role, completion
    index, controller (uid) and name or generateName. :func:`removing_scheduler_only`
    removes every seal the webhook cannot recompute, so a seal on a stored Fluence pod is
    one the split wrote; and when the API server calls the webhook again because a later
    webhook changed the pod, the seal from the first call still holds and is kept (a plain
    marker would be stripped by that second call, and the worker refused). A seal copied
    onto another pod holds only for one with the same name, index and controller: a copy
    of the same split pod.

    A new key at each start: a second call that reaches a restarted webhook drops the seal
    and the policy refuses the pod, which its Job then creates again. Replicas would each
    hold their own key, which is why deploy/ runs one.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def seal(self, pod: Mapping[str, Any], namespace: str) -> str:
        """The seal of ``pod`` (labelled with its role already) in ``namespace``."""
        return hmac.new(self._key, _sealed_fields(pod, namespace), hashlib.sha256).hexdigest()

    def holds(self, pod: Mapping[str, Any], namespace: str) -> bool:
        """Whether ``pod`` carries the seal this webhook made for it."""
        found = annotations_of(pod).get(names.SPLIT_SEAL_ANNOTATION)
        return isinstance(found, str) and hmac.compare_digest(found, self.seal(pod, namespace))


def sealer_of(state: ServiceState) -> Sealer:
    """The admission service's sealer: one key for the life of the webhook process."""
    return state.get("webhook:sealer", Sealer)


def _sealed_fields(pod: Mapping[str, Any], namespace: str) -> bytes:
    labels, meta = labels_of(pod), metadata_of(pod)
    controller = controller_reference(pod) or {}
    index = labels.get(names.JOB_COMPLETION_INDEX) or annotations_of(pod).get(
        names.JOB_COMPLETION_INDEX)
    return orjson.dumps([namespace, labels.get(names.GROUP_LABEL), labels.get(names.ROLE_LABEL),
                         index, controller.get("uid"), meta.get("name"),
                         meta.get("generateName")])


def removing_scheduler_only(pod: Mapping[str, Any], sealer: Sealer | None = None,
                            namespace: str = "") -> JsonPatch:
    """The JSON patch removing every scheduler-only annotation ``pod`` carries, and its
    split seal unless ``sealer`` made it for ``pod`` in ``namespace``."""
    annotations = annotations_of(pod)
    forged_seal = names.SPLIT_SEAL_ANNOTATION in annotations and (
        sealer is None or not sealer.holds(pod, namespace))
    return [{"op": "remove", "path": pointer("metadata", "annotations", str(key))}
            for key in annotations
            if scheduler_only(str(key)) or (key == names.SPLIT_SEAL_ANNOTATION and forged_seal)]


def condition() -> str:
    """CEL true for every pod :func:`removing_scheduler_only` may change: it must reach the
    webhook."""
    exact = ", ".join(cel.quoted(key) for key in (*names.SCHEDULER_ONLY_ANNOTATIONS,
                                                   names.SPLIT_SEAL_ANNOTATION))
    prefixes = " || ".join(f"k.startsWith({cel.quoted(p)})"
                           for p in names.SCHEDULER_ONLY_PREFIXES)
    return ("(has(object.metadata.annotations) && object.metadata.annotations.exists(k, "
            f"k in [{exact}] || {prefixes}))")
