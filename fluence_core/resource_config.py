"""The ``resources.yaml`` model: virtual resources with a count and attributes.

The file is validated as a whole before anything uses it; every error names the
file and the path of the offending entry (``resources[0].with[1]``), because a
scheduler that starts with half a config is worse than one that refuses to start.
:class:`ResourceConfig` shows the schema.

Every name ends up somewhere Kubernetes or Fluxion checks it, so each is held to
that rule here, where the error can name the entry: a type is the name part of
the extended resource ``fluxion.flux-framework.org/<type>`` (and of a device
plugin socket), a name is a segment of the graph's vertex paths, an attribute key
becomes the annotation ``attr-<key>`` and the variable ``FLUXION_<KEY>`` (two
keys that make one variable are an error), a parent is a node name. Counts are
bounded (:mod:`fluence_core.limits`), per entry and over the whole expanded tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from fluence_core import limits, names, yamlfile
from fluence_core.errors import FluenceError, ResourceConfigError, TopologyError
from fluence_core.topology import Level, parse_levels

CLUSTER = "cluster"
_ENTRY_KEYS = frozenset({"type", "name", "parent", "count", "attributes", "with"})
_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
"""A Kubernetes qualified name's name part (extended resources, annotation keys)."""
_NODE_NAME = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII
)
"""A DNS subdomain, as Kubernetes names nodes."""
MAX_NAME_PART = 63
MAX_ATTRIBUTE_KEY = MAX_NAME_PART - len("attr-")
"""So that ``attr-<key>`` and ``require-<key>`` stay valid annotation names."""
MAX_ATTRIBUTE_VALUE = 1024
RESERVED_ATTRIBUTES = frozenset({"backend"})
"""Keys Fluence sets itself (``FLUXION_BACKEND``); a file may not redefine them."""


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
    """The validated content of a resources file (empty = classical only).

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
        topology:                # optional: levels of the graph (fluence_core.topology)
          levels: [topology.kubernetes.io/zone, {label: example.com/rack, type: rack}]

    Attributes inherit downward; a child's value overrides; an empty string removes
    the key.
    """

    resources: tuple[VirtualResource, ...] = ()
    source: str = "<empty>"
    attribute_keys: tuple[str, ...] = field(default=())
    levels: tuple[Level, ...] = ()
    """Topology levels, widest first (``topology.levels``); none: a flat graph."""

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
        text = yamlfile.read_text(path)
    except FluenceError as error:
        raise ResourceConfigError(str(error)) from None
    return parse_resource_config(text, source)


def parse_resource_config(text: str, source: str = "<string>") -> ResourceConfig:
    """Validate the YAML text of a resources file."""
    try:
        document = yamlfile.load(text)
    except yaml.YAMLError as error:
        raise ResourceConfigError(f"{source}: not valid YAML: {error}") from None
    if document is None:
        return ResourceConfig(source=source)
    if not isinstance(document, dict):
        raise ResourceConfigError(f"{source}: expected a mapping with a 'resources' list")
    if "resources" not in document and "topology" not in document:
        raise ResourceConfigError(
            f"{source}: no 'resources' key (an empty file means classical only)"
        )
    unknown_top = set(document) - {"resources", "attributes", "topology"}
    if unknown_top:
        raise ResourceConfigError(f"{source}: unknown top-level keys {sorted(unknown_top)}")
    levels = _read_topology(document.get("topology"), source)
    registry = _read_registry(document.get("attributes"), source)
    entries = document.get("resources")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ResourceConfigError(f"{source}: resources: expected a list")
    resolved = tuple(
        _resolve(entry, f"resources[{i}]", {}, registry, source, top_level=True)
        for i, entry in enumerate(entries)
    )
    _check_siblings(resolved, "resources", source)
    vertices = sum(_vertices(r) for r in resolved)
    if vertices > limits.MAX_VIRTUAL_VERTICES:
        raise ResourceConfigError(
            f"{source}: the resources expand to {vertices} virtual vertices (counts multiply"
            f" down the tree); the limit is {limits.MAX_VIRTUAL_VERTICES}"
        )
    keys: dict[str, None] = {}
    for resource in resolved:
        _collect_keys(resource, keys)
    _check_env_names(keys, source)
    return ResourceConfig(
        resources=resolved, source=source, attribute_keys=tuple(keys), levels=levels
    )


def _read_topology(raw: Any, source: str) -> tuple[Level, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ResourceConfigError(f"{source}: topology: expected a mapping with a 'levels' list")
    unknown = set(raw) - {"levels"}
    if unknown:
        raise ResourceConfigError(f"{source}: topology: unknown keys {sorted(unknown)}")
    try:
        return parse_levels(raw.get("levels"), f"{source}: topology.levels")
    except TopologyError as error:
        raise ResourceConfigError(str(error)) from None


def _vertices(resource: VirtualResource) -> int:
    """Vertices one entry becomes: ``count`` copies of itself and its subtree."""
    return resource.count * (1 + sum(_vertices(c) for c in resource.children))


def _check_siblings(resources: tuple[VirtualResource, ...], where: str, source: str) -> None:
    """Names are path segments of the graph: two siblings with one name would share paths."""
    seen: dict[tuple[str, str], str] = {}
    for resource in resources:
        key = (resource.parent, resource.name)
        if key in seen:
            raise ResourceConfigError(
                f"{source}: {resource.path}: name {resource.name!r} is already used by"
                f" {seen[key]} under the same parent ({where}); names must differ"
            )
        seen[key] = resource.path


def _check_env_names(keys: Mapping[str, None], source: str) -> None:
    by_env: dict[str, str] = {}
    for key in keys:
        env = names.env_name_for_attribute(key)
        if env in by_env and by_env[env] != key:
            raise ResourceConfigError(
                f"{source}: attribute keys {by_env[env]!r} and {key!r} both become the"
                f" environment variable {env}; rename one"
            )
        by_env[env] = key


def _check_name(
    value: Any, what: str, path: str, source: str, *, limit: int = MAX_NAME_PART
) -> str:
    if not isinstance(value, str):
        raise ResourceConfigError(
            f"{source}: {path}: {what} must be a string, got {value!r} (quote it)"
        )
    if len(value) > limit or not _NAME_PART.fullmatch(value):
        raise ResourceConfigError(
            f"{source}: {path}: {what} {value[:80]!r} must be at most {limit} characters of"
            " letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
        )
    return value


def _read_registry(raw: Any, source: str) -> dict[str, dict[str, str]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ResourceConfigError(
            f"{source}: attributes: expected a mapping of named attribute sets"
        )
    registry = {}
    for name, values in raw.items():
        _check_name(name, "attribute set name", f"attributes.{name}", source)
        registry[str(name)] = _attribute_map(values, f"attributes.{name}", source)
    return registry


def _attribute_map(raw: Any, path: str, source: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ResourceConfigError(f"{source}: {path}: expected a mapping of attribute values")
    values = {}
    for key, value in raw.items():
        _check_name(key, "attribute key", f"{path}.{key}", source, limit=MAX_ATTRIBUTE_KEY)
        if key in RESERVED_ATTRIBUTES:
            raise ResourceConfigError(
                f"{source}: {path}.{key}: {key!r} is set by Fluence itself (the backend's name);"
                " use another key"
            )
        if isinstance(value, (dict, list)):
            raise ResourceConfigError(f"{source}: {path}.{key}: attribute values must be scalars")
        text = "" if value is None else _scalar_text(value)
        if len(text) > MAX_ATTRIBUTE_VALUE or not text.isprintable():
            raise ResourceConfigError(
                f"{source}: {path}.{key}: the value must be printable text of at most"
                f" {MAX_ATTRIBUTE_VALUE} characters"
            )
        values[key] = text
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
    depth: int = 1,
) -> VirtualResource:
    if depth > limits.MAX_CONFIG_DEPTH:
        raise ResourceConfigError(
            f"{source}: {path}: 'with' nested deeper than {limits.MAX_CONFIG_DEPTH} levels"
        )
    if not isinstance(entry, dict):
        raise ResourceConfigError(f"{source}: {path}: expected a mapping")
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise ResourceConfigError(f"{source}: {path}: unknown keys {sorted(unknown)}")
    rtype = entry.get("type")
    if rtype is None or rtype == "":
        raise ResourceConfigError(f"{source}: {path}: missing 'type'")
    rtype = _check_name(rtype, "type", path, source)
    name = _check_name(entry.get("name", rtype), "name", path, source)
    count = entry.get("count", 1)
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or not 1 <= count <= limits.MAX_VIRTUAL_COUNT
    ):
        raise ResourceConfigError(
            f"{source}: {path}: count must be an integer from 1 to {limits.MAX_VIRTUAL_COUNT},"
            f" got {count!r}"
        )
    parent = entry.get("parent", CLUSTER)
    if not top_level and "parent" in entry:
        raise ResourceConfigError(
            f"{source}: {path}: 'parent' is only allowed on top-level entries"
        )
    if parent != CLUSTER and (
        not isinstance(parent, str)
        or len(parent) > limits.MAX_NAME_LENGTH
        or not _NODE_NAME.fullmatch(parent)
    ):
        raise ResourceConfigError(
            f"{source}: {path}: parent {str(parent)[:80]!r} is neither {CLUSTER!r} nor a valid"
            " node name"
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
        _resolve(
            child, f"{path}.with[{i}]", merged, registry, source, top_level=False, depth=depth + 1
        )
        for i, child in enumerate(children_raw)
    )
    _check_siblings(children, f"{path}.with", source)
    return VirtualResource(
        type=rtype,
        name=name,
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
