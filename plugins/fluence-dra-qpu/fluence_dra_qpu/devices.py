"""From a resources file to the devices of the driver's pools.

Every vertex a pod could ask for (each instance of each entry, children
included) becomes one device, so a claim can ask for a ``qdevice`` as well as
for one of its ``qubit`` s. A vertex under the cluster is reachable from every
node and goes to the pool ``cluster`` (a slice with ``allNodes``); a vertex
whose top-level entry hangs under a node goes to that node's pool (a slice with
``nodeName``).

Each device carries two kinds of attributes. The driver's own, in its domain
(``qpu.fluxion.flux-framework.org``): ``type``, ``backend`` (the name
``FLUXION_BACKEND`` carries) and ``vertex`` (its path in the graph). The file's
attributes, inherited as the file resolves them, in the domain
``fluxion.flux-framework.org``, so a claim reads
``device.attributes["fluxion.flux-framework.org"].region``. Kubernetes holds
attributes to rules the file does not: a name is a C identifier of at most 32
characters, a string value at most 64 characters, at most 32 attributes a
device. A key with ``-`` or ``.`` is published with ``_`` in their place; what
still breaks a rule is left out with a warning naming the entry, rather than
failing the whole pool. Values that read as integers or booleans are published
as ``int`` and ``bool`` so CEL can compare them (``qubits >= 80``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core.api import ResourceConfig, logger, names

CLUSTER_POOL = "cluster"
"""The pool of the vertices every node reaches."""
FILE_DOMAIN = names.RESOURCE_DOMAIN
"""Where the file's attributes live on a device."""
MAX_ATTRIBUTES = 32
MAX_ATTRIBUTE_NAME = 32
MAX_STRING_VALUE = 64
MAX_DEVICE_NAME = 63
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_INTEGER = re.compile(r"-?[0-9]{1,18}", re.ASCII)
_DNS_UNSAFE = re.compile(r"[^a-z0-9-]+", re.ASCII)


@dataclass(frozen=True)
class PoolDevices:
    """One pool's devices and where they are reachable from."""

    name: str
    node: str | None
    """The node of a node-local pool; None: every node (``allNodes``)."""
    devices: tuple[dict[str, Any], ...]


@dataclass
class _Vertex:
    type: str
    path: str
    backend: str
    attributes: Mapping[str, str]


def pools_of(config: ResourceConfig, *, warn: bool = True) -> dict[str, PoolDevices]:
    """The pools the driver publishes for ``config``, by name (none for an empty file);
    ``warn``: log each attribute left out."""
    pools: dict[str, tuple[str | None, list[dict[str, Any]]]] = {}
    for pool_name, node, _vertex, device in _published(config, warn=warn):
        pools.setdefault(pool_name, (node, []))[1].append(device)
    return {name: PoolDevices(name, node, tuple(devices))
            for name, (node, devices) in pools.items()}


def device_env(config: ResourceConfig) -> dict[tuple[str, str], dict[str, str]]:
    """``(pool, device)`` -> the variables a container using that device gets:
    ``FLUXION_BACKEND`` and ``FLUXION_<KEY>`` for every attribute of the file, the names
    and values the webhook injects for the extended resource."""
    return {
        (pool_name, device["name"]): {
            names.ENV_BACKEND: vertex.backend,
            **{names.env_name_for_attribute(k): v for k, v in sorted(vertex.attributes.items())},
        }
        for pool_name, _node, vertex, device in _published(config, warn=False)
    }


def _published(config: ResourceConfig, *, warn: bool = True,
               ) -> Iterator[tuple[str, str | None, _Vertex, dict[str, Any]]]:
    """Every vertex with its pool, the pool's node, and its device, named uniquely per pool
    (``warn``: log what is left out)."""
    taken: dict[str, set[str]] = {}
    for resource in config.resources:
        node = None if resource.parent == "cluster" else resource.parent
        pool_name = node or CLUSTER_POOL
        for vertex in _vertices(resource, "", resource.name):
            device = _device(vertex, taken.setdefault(pool_name, set()),
                             config.source if warn else None)
            yield pool_name, node, vertex, device


def _vertices(resource: Any, base: str, backend: str) -> Iterator[_Vertex]:
    """Every instance of ``resource`` and of its children, depth first, with the paths
    the graph gives them (``<name><instance>`` segments)."""
    for instance in range(resource.count):
        path = f"{base}/{resource.name}{instance}"
        yield _Vertex(resource.type, path, backend, resource.attributes)
        for child in resource.children:
            yield from _vertices(child, path, backend)


def device_name(path: str, taken: set[str]) -> str:
    """A DNS label for the vertex at ``path``, unique among ``taken`` (which it joins):
    the path's segments joined by ``-``, or, when that is too long or already used, a
    short prefix and a hash of the path."""
    readable = _DNS_UNSAFE.sub("-", path.strip("/").lower().replace("/", "-")).strip("-")
    name = readable
    if not name or len(name) > MAX_DEVICE_NAME or name in taken:
        digest = hashlib.sha256(path.encode()).hexdigest()[:12]
        name = f"{readable[:40].strip('-') or 'vertex'}-{digest}"
    taken.add(name)
    return name


def attribute_name(key: str) -> str | None:
    """The DRA attribute name of a file's key, or None when Kubernetes would refuse it."""
    name = key.replace("-", "_").replace(".", "_")
    if len(name) > MAX_ATTRIBUTE_NAME or not _C_IDENTIFIER.fullmatch(name):
        return None
    return name


def typed_value(text: str) -> dict[str, Any] | None:
    """The DRA value of a file's attribute text (None: a string too long to publish)."""
    if text in ("true", "false"):
        return {"bool": text == "true"}
    if _INTEGER.fullmatch(text):
        return {"int": int(text)}
    if len(text) > MAX_STRING_VALUE:
        return None
    return {"string": text}


def _device(vertex: _Vertex, taken: set[str], source: str | None) -> dict[str, Any]:
    """The device of ``vertex``; what Kubernetes would refuse is left out, with a warning
    naming ``source`` (None: silently)."""
    def left_out(why: str) -> None:
        if source is not None:
            logger.warning("qpu driver: %s: %s: %s", source, vertex.path, why)

    attributes: dict[str, Any] = {
        "type": {"string": vertex.type},
        "backend": {"string": vertex.backend},
    }
    if len(vertex.path) <= MAX_STRING_VALUE:
        attributes["vertex"] = {"string": vertex.path}
    for key, text in sorted(vertex.attributes.items()):
        name, value = attribute_name(key), typed_value(text)
        if name is None:
            left_out(f"attribute {key!r} is not published (not a C identifier of at most"
                     f" {MAX_ATTRIBUTE_NAME} characters)")
        elif value is None:
            left_out(f"attribute {key!r} is not published (its value is longer than"
                     f" {MAX_STRING_VALUE} characters)")
        elif f"{FILE_DOMAIN}/{name}" in attributes:
            left_out(f"attribute {key!r} is published as {name} already; this one is left out")
        elif len(attributes) >= MAX_ATTRIBUTES:
            left_out(f"more than {MAX_ATTRIBUTES} attributes; {key!r} and the rest are left out")
            break
        else:
            attributes[f"{FILE_DOMAIN}/{name}"] = value
    return {"name": device_name(vertex.path, taken), "attributes": attributes}
