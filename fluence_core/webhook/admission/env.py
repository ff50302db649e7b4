"""Helpers for patching container env, volumes and mounts idempotently."""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core.kube.patch import JsonPatch, pointer


def annotation_env(variable: str, annotation: str) -> dict[str, Any]:
    """A downward-API env var reading one of the pod's annotations."""
    return {
        "name": variable,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}},
    }


def field_env(variable: str, field_path: str) -> dict[str, Any]:
    return {"name": variable, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def add_env(container: Mapping[str, Any], base: str, env: list[dict[str, Any]]) -> JsonPatch:
    """Ops adding each env var the container does not define yet (``base`` points at the container).
    """
    present = {e.get("name") for e in container.get("env") or []}
    missing = [e for e in env if e["name"] not in present]
    if not missing:
        return []
    if container.get("env") is None:
        return [{"op": "add", "path": base + pointer("env"), "value": missing}]
    return [{"op": "add", "path": base + pointer("env", "-"), "value": e} for e in missing]


def add_to_list(owner: Mapping[str, Any], base: str, key: str, item: dict[str, Any],
                *, identity: str = "name") -> JsonPatch:
    """Add ``item`` to list ``key`` of ``owner`` unless an entry with the same identity exists."""
    current = owner.get(key)
    if current and any(entry.get(identity) == item.get(identity) for entry in current):
        return []
    if current is None:
        return [{"op": "add", "path": base + pointer(key), "value": [item]}]
    return [{"op": "add", "path": base + pointer(key, "-"), "value": item}]


def add_all_to_list(owner: Mapping[str, Any], base: str, key: str,
                    items: list[dict[str, Any]], *, identity: str = "name") -> JsonPatch:
    """:func:`add_to_list` for several items at once (separate calls, each computed against
    the original, would each create the list when it is absent)."""
    current = owner.get(key)
    present = {entry.get(identity) for entry in current or []}
    missing = [item for item in items if item.get(identity) not in present]
    if not missing:
        return []
    if current is None:
        return [{"op": "add", "path": base + pointer(key), "value": missing}]
    return [{"op": "add", "path": base + pointer(key, "-"), "value": item} for item in missing]
