"""Which pods the webhook cannot read, and the CEL that sends them to it to be refused.

The API server validates a Pod only after the mutating webhooks ran, so a review can
carry any JSON. The review refuses a pod whose fields the handlers read are not the
shape they expect (:func:`shape_problem`), and the controller asks the same question of
a Job's pod template before it makes the Job's PodGroups, so both refuse the same pods.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from fluence_core import names
from fluence_core.kube.meta import annotations_of, labels_of
from fluence_core.webhook import cel


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            re.ASCII)
MAX_GROUP_NAME = 253 - len(names.SCOUT_GROUP_SUFFIX)
"""A group names PodGroups ``<group>`` and ``<group>-scout``: both must be object names."""
_COORDINATIONS = (names.COORDINATION_INDEPENDENT, names.COORDINATION_SHARED)


def shape_problem(pod: Mapping[str, Any]) -> str | None:
    """What makes ``pod`` unreadable for the handlers, or None.

    The API server validates a Pod only after mutating webhooks ran, so a review
    can carry any JSON: every field the handlers read is checked here once, and
    each problem is named with its path.
    """
    meta = pod.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        return "pod metadata is not an object"
    meta = meta or {}
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not isinstance(value, Mapping):
            return f"metadata.{key} is not an object"
    body = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        listed = body.get(key)
        if listed is None:
            continue
        if not isinstance(listed, list):
            return f"spec.{key} is not a list"
        for i, container in enumerate(listed):
            if not isinstance(container, Mapping):
                return f"spec.{key}[{i}] is not an object"
            resources = container.get("resources")
            if resources is None:
                continue
            if not isinstance(resources, Mapping):
                return f"spec.{key}[{i}].resources is not an object"
            for part in ("requests", "limits"):
                if resources.get(part) is not None and not isinstance(resources[part], Mapping):
                    return f"spec.{key}[{i}].resources.{part} is not an object"
    group = labels_of(pod).get(names.GROUP_LABEL)
    if group and (not isinstance(group, str) or len(group) > MAX_GROUP_NAME
                  or not _DNS_SUBDOMAIN.fullmatch(group)):
        return (f"label {names.GROUP_LABEL}: group {str(group)[:80]!r} must be a lower-case DNS"
                f" name of at most {MAX_GROUP_NAME} characters (it names the PodGroup)")
    coordination = annotations_of(pod).get(names.COORDINATION_ANNOTATION)
    if coordination is not None and coordination not in _COORDINATIONS:
        return (f"{names.COORDINATION_ANNOTATION}={str(coordination)[:40]!r} must be"
                f" {' or '.join(repr(c) for c in _COORDINATIONS)}")
    return None


def shape_condition() -> str:
    """CEL true for every pod :func:`shape_problem` may refuse, as the API server sends it.

    The API server decodes a Pod before any webhook sees it, so the structural
    checks (objects, lists) cannot fail on what it sends; a bad group label or
    coordination annotation can, and a pod carrying one must reach the webhook.
    """
    group = cel.label(names.GROUP_LABEL)
    dns = cel.quoted(f"^{_DNS_SUBDOMAIN.pattern}$")
    bad_group = cel.all_of(f"{group} != ''", f"!({group}.size() <= {MAX_GROUP_NAME} && "
                                              f"{group}.matches({dns}))")
    allowed = ", ".join(cel.quoted(c) for c in _COORDINATIONS)
    bad_coordination = cel.all_of(
        cel.has_annotation(names.COORDINATION_ANNOTATION),
        f"!({cel.annotation(names.COORDINATION_ANNOTATION)} in [{allowed}])")
    return cel.any_of(bad_group, bad_coordination)
