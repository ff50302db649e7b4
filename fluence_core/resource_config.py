"""The ``resources.yaml`` model: virtual resources with a count and attributes.

The file is validated as a whole before anything uses it; every error names the
file and the path of the offending entry (``resources[0].with[1]``), because a
scheduler that starts with half a config is worse than one that refuses to start.

Schema::

    attributes:              # optional registry of named attribute sets
      aws-east: {provider: braket, region: us-east-1}
    resources:
      - type: qdevice        # required
        name: rigetti_cepheus   # optional, defaults to the type
        parent: cluster      # optional: cluster (default) or a node name
        count: 1             # optional, default 1
        attributes: aws-east # inline map or a registry name
        with: [...]          # children, same schema

Attributes inherit downward; a child's value overrides; an empty string removes
the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from fluence_core.errors import ResourceConfigError

CLUSTER = "cluster"
_ENTRY_KEYS = frozenset({"type", "name", "parent", "count", "attributes", "with"})
_TYPE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


@dataclass(frozen=True)
class VirtualResource:
    """One entry of the file, resolved: attributes already inherited."""

    type: str
    name: str
    count: int
    attributes: Mapping[str, str]
    children: tuple["VirtualResource", ...]
    path: str
    parent: str = CLUSTER

    def types(self) -> list[str]:
        """Its own type and every descendant's, in depth-first order without repeats."""
        seen: dict[str, None] = {self.type: None}
        for child in self.children:
            for t in child.types():
                seen.setdefault(t, None)
        return list(seen)


@dataclass(frozen=True)
class ResourceConfig:
    """The validated content of a resources file (empty = classical only)."""

    resources: tuple[VirtualResource, ...] = ()
    source: str = "<empty>"
    attribute_keys: tuple[str, ...] = field(default=())

    @property
    def types(self) -> list[str]:
        seen: dict[str, None] = {}
        for resource in self.resources:
            for t in resource.types():
                seen.setdefault(t, None)
        return list(seen)

    def check_parents(self, node_names: set[str]) -> None:
        """Fail loudly when a top-level entry names a parent that is not a node."""
        for resource in self.resources:
            if resource.parent != CLUSTER and resource.parent not in node_names:
                raise ResourceConfigError(
                    f"{self.source}: {resource.path}: unknown parent {resource.parent!r} "
                    f"(expected {CLUSTER!r} or a node name)"
                )


def load_resource_config(path: Path | str | None) -> ResourceConfig:
    """Read and validate a resources file; ``None`` means classical only."""
    if path is None:
        return ResourceConfig()
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ResourceConfigError(f"{source}: cannot read: {error.strerror or error}") from None
    return parse_resource_config(text, source)


def parse_resource_config(text: str, source: str = "<string>") -> ResourceConfig:
    """Validate the YAML text of a resources file."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ResourceConfigError(f"{source}: not valid YAML: {error}") from None
    if document is None:
        return ResourceConfig(source=source)
    if not isinstance(document, dict):
        raise ResourceConfigError(f"{source}: expected a mapping with a 'resources' list")
    if "resources" not in document:
        raise ResourceConfigError(
            f"{source}: no 'resources' key (an empty file means classical only)"
        )
    unknown_top = set(document) - {"resources", "attributes"}
    if unknown_top:
        raise ResourceConfigError(f"{source}: unknown top-level keys {sorted(unknown_top)}")
    registry = _read_registry(document.get("attributes"), source)
    entries = document["resources"]
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ResourceConfigError(f"{source}: resources: expected a list")
    resolved = tuple(
        _resolve(entry, f"resources[{i}]", {}, registry, source, top_level=True)
        for i, entry in enumerate(entries)
    )
    keys: dict[str, None] = {}
    for resource in resolved:
        _collect_keys(resource, keys)
    return ResourceConfig(resources=resolved, source=source, attribute_keys=tuple(keys))


def _read_registry(raw: Any, source: str) -> dict[str, dict[str, str]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ResourceConfigError(
            f"{source}: attributes: expected a mapping of named attribute sets"
        )
    registry = {}
    for name, values in raw.items():
        registry[str(name)] = _attribute_map(values, f"attributes.{name}", source)
    return registry


def _attribute_map(raw: Any, path: str, source: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ResourceConfigError(f"{source}: {path}: expected a mapping of attribute values")
    values = {}
    for key, value in raw.items():
        if isinstance(value, (dict, list)):
            raise ResourceConfigError(f"{source}: {path}.{key}: attribute values must be scalars")
        values[str(key)] = "" if value is None else _scalar_text(value)
    return values


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _resolve(
    entry: Any,
    path: str,
    inherited: Mapping[str, str],
    registry: Mapping[str, dict[str, str]],
    source: str,
    *,
    top_level: bool,
) -> VirtualResource:
    if not isinstance(entry, dict):
        raise ResourceConfigError(f"{source}: {path}: expected a mapping")
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise ResourceConfigError(f"{source}: {path}: unknown keys {sorted(unknown)}")
    rtype = entry.get("type")
    if not rtype:
        raise ResourceConfigError(f"{source}: {path}: missing 'type'")
    rtype = str(rtype)
    if not set(rtype) <= _TYPE_CHARS:
        raise ResourceConfigError(
            f"{source}: {path}: type {rtype!r} may hold only letters, digits, '_', '-' and '.'"
        )
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ResourceConfigError(
            f"{source}: {path}: count must be a positive integer, got {count!r}"
        )
    parent = entry.get("parent", CLUSTER)
    if not top_level and "parent" in entry:
        raise ResourceConfigError(
            f"{source}: {path}: 'parent' is only allowed on top-level entries"
        )
    raw_attributes = entry.get("attributes")
    if raw_attributes is None:
        own: dict[str, str] = {}
    elif isinstance(raw_attributes, str):
        if raw_attributes not in registry:
            raise ResourceConfigError(
                f"{source}: {path}: unknown attributes {raw_attributes!r} "
                f"(registry has {sorted(registry) or 'nothing'})"
            )
        own = registry[raw_attributes]
    else:
        own = _attribute_map(raw_attributes, f"{path}.attributes", source)
    merged = dict(inherited)
    for key, value in own.items():
        if value == "":
            merged.pop(key, None)
        else:
            merged[key] = value
    children_raw = entry.get("with") or []
    if not isinstance(children_raw, list):
        raise ResourceConfigError(f"{source}: {path}.with: expected a list")
    children = tuple(
        _resolve(child, f"{path}.with[{i}]", merged, registry, source, top_level=False)
        for i, child in enumerate(children_raw)
    )
    return VirtualResource(
        type=rtype,
        name=str(entry.get("name") or rtype),
        count=count,
        attributes=merged,
        children=children,
        path=path,
        parent=str(parent),
    )


def _collect_keys(resource: VirtualResource, keys: dict[str, None]) -> None:
    for key in resource.attributes:
        keys.setdefault(key, None)
    for child in resource.children:
        _collect_keys(child, keys)
