"""Fluence's annotations are Fluence's: what the webhook strips from a pod at CREATE.

Issue 32, attack 2: a tenant created a pod carrying
``fluence.flux-framework.org/allocation`` listing every core of two free nodes; after a
restart the scheduler restored it as a record, bound the pod against its nodeSelector
and withheld both nodes from everyone. The keys only Fluence writes after admission
(:data:`~fluence_core.names.SCHEDULER_ONLY_ANNOTATIONS` and the ``attr-*`` and
``scout-*`` families) are therefore removed from every Fluence pod the webhook admits,
whoever sends it (a Job's pods, made by the job controller from a template the user
wrote, included), and the pods carrying one are always sent to the webhook
(:func:`condition`). Pods the webhook never sees (another scheduler's) and every later
edit are the admission policy's (``deploy/admission-policy.yaml``): it refuses, from
anyone but Fluence's ServiceAccounts, a CREATE still carrying such a key and an UPDATE
that sets, changes or removes any key Fluence owns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core import names
from fluence_core.webhook import cel
from fluence_core.kube.patch import JsonPatch, pointer
from fluence_core.kube.meta import annotations_of


def scheduler_only(key: str) -> bool:
    """Whether only Fluence writes annotation ``key``, and only after admission."""
    return key in names.SCHEDULER_ONLY_ANNOTATIONS or key.startswith(
        names.SCHEDULER_ONLY_PREFIXES)


def owned(key: str) -> bool:
    """Whether annotation ``key`` is one only Fluence may set or change on a stored object."""
    return key in names.OWNED_ANNOTATIONS or key.startswith(names.SCHEDULER_ONLY_PREFIXES)


def strip(pod: Mapping[str, Any]) -> JsonPatch:
    """The JSON patch removing every scheduler-only annotation ``pod`` carries."""
    annotations = annotations_of(pod)
    return [{"op": "remove", "path": pointer("metadata", "annotations", str(key))}
            for key in annotations if scheduler_only(str(key))]


def condition() -> str:
    """CEL true for every pod :func:`strip` changes: it must reach the webhook."""
    exact = ", ".join(cel.quoted(key) for key in names.SCHEDULER_ONLY_ANNOTATIONS)
    prefixes = " || ".join(f"k.startsWith({cel.quoted(p)})"
                           for p in names.SCHEDULER_ONLY_PREFIXES)
    return ("(has(object.metadata.annotations) && object.metadata.annotations.exists(k, "
            f"k in [{exact}] || {prefixes}))")
