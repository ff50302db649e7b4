"""The environment a container sees, as the kubelet computes it from the pod.

The webhook injects plain values and downward-API references
(``valueFrom.fieldRef``: ``metadata.uid``, ``metadata.annotations['...']``);
the kubelet resolves them when the container starts. :func:`container_env`
does the same against a pod object, so the in-memory simulator and the tests
configure the sidecar from exactly what the webhook wrote, not from a copy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fluence_core.errors import FluenceError
from fluence_core.kube.meta import metadata_of

_KEYED = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")
_PLAIN = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "metadata.uid": ("metadata", "uid"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.podIP": ("status", "podIP"),
    "status.hostIP": ("status", "hostIP"),
}


def field_value(pod: Mapping[str, Any], path: str) -> str:
    """One ``fieldRef.fieldPath`` of ``pod``; an absent label or annotation is ``""``
    (as the kubelet gives it), an unsupported path raises."""
    keyed = _KEYED.match(path)
    if keyed:
        section = metadata_of(pod).get(keyed.group(1)) or {}
        return str(section.get(keyed.group(2), ""))
    if path in _PLAIN:
        part, key = _PLAIN[path]
        return str((pod.get(part) or {}).get(key) or "")
    raise FluenceError(f"downward API field {path!r} is not supported here")


def container_env(pod: Mapping[str, Any], container: str) -> dict[str, str]:
    """``name -> value`` for every env entry of ``container`` (containers, then init
    containers), downward-API references resolved against ``pod``. Later entries
    win, as in the kubelet; ``$(VAR)`` expansion and env from ConfigMaps/Secrets
    are not modelled (the webhook injects neither)."""
    spec = pod.get("spec") or {}
    found = next((c for section in ("containers", "initContainers")
                  for c in spec.get(section) or [] if c.get("name") == container), None)
    if found is None:
        raise FluenceError(
            f"pod {metadata_of(pod).get('name')} has no container {container!r}"
        )
    env: dict[str, str] = {}
    for entry in found.get("env") or []:
        if "value" in entry or "valueFrom" not in entry:
            env[entry["name"]] = str(entry.get("value") or "")
            continue
        ref = (entry["valueFrom"] or {}).get("fieldRef")
        if ref is None:
            raise FluenceError(f"env {entry['name']}: only fieldRef is supported here")
        env[entry["name"]] = field_value(pod, ref["fieldPath"])
    return env
