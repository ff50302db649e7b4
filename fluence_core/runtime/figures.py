"""Backend figures: price, queue depth, status and qubits, as a file or Fluence's ConfigMap.

``fluence select`` (and ``kubectl fluence select``) ranks backends by these figures. Why
one schema for both: a user who keeps a file (``--prices``) and a cluster where Fluence
refreshes the ConfigMap (:mod:`fluence_core.runtime.refresh`) must rank backends the
same way, so both are read by :func:`parse`, which shows the schema. Every key is
optional; an unknown key or a value of the wrong kind is an error naming the backend
and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fluence_core import names, yamlfile
from fluence_core.kube.api import CONFIGMAPS, ClusterAPI, KubeObject
from fluence_core.errors import FluenceError
from fluence_core.runtime.provider import BackendInfo
from fluence_core.kube.meta import metadata_of

NUMBERS = ("price_per_shot", "price_per_task")
COUNTS = ("queue", "qubits")
TEXTS = ("status", "source", "updated")
KEYS = NUMBERS + COUNTS + TEXTS


@dataclass(frozen=True)
class ConfigMapRef:
    """Where Fluence keeps the figures: ``namespace/name``."""

    namespace: str = names.FLUENCE_NAMESPACE
    name: str = names.BACKENDS_CONFIGMAP

    @classmethod
    def parse(cls, text: str) -> "ConfigMapRef":
        """``NAME`` (in Fluence's namespace) or ``NAMESPACE/NAME``."""
        namespace, _, name = text.rpartition("/")
        if not name or "/" in namespace:
            raise FluenceError(f"ConfigMap {text!r}: expected NAME or NAMESPACE/NAME")
        return cls(namespace or names.FLUENCE_NAMESPACE, name)

    def __str__(self) -> str:
        return f"configmap {self.namespace}/{self.name}"


def _entry(name: str, figures: object, where: str) -> dict[str, Any]:
    if figures is None:
        return {}
    if not isinstance(figures, dict):
        raise FluenceError(f"{where}: {name}: expected a mapping of figures, got {figures!r}")
    unknown = set(figures) - set(KEYS)
    if unknown:
        raise FluenceError(
            f"{where}: {name}: unknown keys {sorted(map(str, unknown))} (allowed: {sorted(KEYS)})"
        )
    entry: dict[str, Any] = {}
    for key, value in figures.items():
        if value is None:
            continue
        if key in NUMBERS:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        elif key in COUNTS:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, str)
        if not ok:
            kind = {**dict.fromkeys(NUMBERS, "a number >= 0"),
                    **dict.fromkeys(COUNTS, "a whole number >= 0")}.get(key, "text")
            raise FluenceError(f"{where}: {name}: {key}: expected {kind}, got {value!r}")
        entry[key] = value
    return entry


def parse(text: str, where: str) -> dict[str, dict[str, Any]]:
    """The validated entries of a figures document, by backend name.

    They come from one schema, read the same way from a file a user
    keeps (``--prices``) or from the ConfigMap Fluence refreshes
    (:mod:`fluence_core.runtime.refresh`)::

        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: fluence-backends            # names.BACKENDS_CONFIGMAP
          namespace: fluence-system         # names.FLUENCE_NAMESPACE
          labels: {fluence.flux-framework.org/managed-by: fluence}
          annotations: {fluence.flux-framework.org/refreshed-at: "2026-11-30T13:00:00Z"}
        data:
          backends.yaml: |                  # names.BACKENDS_CONFIGMAP_KEY
            <backend name>:                 # a top-level resource of resources.yaml
              price_per_shot: 0.00145       # USD, number or absent
              price_per_task: 0.3           # USD, number or absent
              queue: 3                      # tasks waiting, whole number or absent
              status: online                # "online" when the backend takes work
              qubits: 20                    # whole number or absent
              source: braket                # optional: who reported the figures
              updated: "2026-11-30T13:00:00Z"   # optional: when they were reported

    The file form is the ``data`` value alone (the mapping of backend to figures).
    Every key is optional; an unknown key or a value of the wrong kind is an error
    naming the backend and the key.
    """
    try:
        data = yamlfile.load(text) or {}
    except yaml.YAMLError as error:
        raise FluenceError(f"{where}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise FluenceError(f"{where}: expected a mapping of backend name to its figures")
    return {str(name): _entry(str(name), figures, where) for name, figures in data.items()}


def render(entries: Mapping[str, Mapping[str, Any]]) -> str:
    """The document :func:`parse` reads back, sorted so an unchanged set renders the same."""
    plain = {name: dict(sorted(entry.items())) for name, entry in sorted(entries.items())}
    text: str = yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)
    return text


def as_infos(entries: Mapping[str, Mapping[str, Any]], where: str) -> dict[str, BackendInfo]:
    """Each entry as a :class:`BackendInfo` whose source says where (and when) it came from."""
    infos = {}
    for name, entry in entries.items():
        origin = ", ".join(str(entry[k]) for k in ("source", "updated") if entry.get(k))
        source = f"{where} ({origin})" if origin else where
        figures = {k: entry.get(k) for k in NUMBERS + COUNTS + ("status",)}
        infos[name] = BackendInfo(name, source=source, **figures)
    return infos


def load_file(path: Path) -> dict[str, BackendInfo]:
    """The figures a user keeps in a file (the ``data`` value of the ConfigMap)."""
    return as_infos(parse(yamlfile.read_text(path), str(path)), str(path))


def entries_of(configmap: KubeObject, ref: ConfigMapRef) -> dict[str, dict[str, Any]]:
    """The entries a ConfigMap holds (none when the key is missing)."""
    text = (configmap.get("data") or {}).get(names.BACKENDS_CONFIGMAP_KEY)
    if text is None:
        return {}
    return parse(str(text), f"{ref} key {names.BACKENDS_CONFIGMAP_KEY}")


def read_configmap(cluster: ClusterAPI, ref: ConfigMapRef) -> dict[str, BackendInfo]:
    """The figures Fluence keeps; a missing ConfigMap is an error saying who writes it."""
    configmap = cluster.get(CONFIGMAPS, ref.name, ref.namespace)
    if configmap is None:
        raise FluenceError(
            f"{ref} does not exist: Fluence's scheduler writes it when "
            "FLUENCE_BACKEND_REFRESH is above 0 (or pass --prices FILE)"
        )
    return as_infos(entries_of(configmap, ref), str(ref))


def configmap_body(ref: ConfigMapRef, entries: Mapping[str, Mapping[str, Any]],
                   refreshed_at: str, resource_version: str | None = None) -> KubeObject:
    """The whole ConfigMap for ``entries`` (with the version read, for an update)."""
    metadata: KubeObject = {
        "name": ref.name,
        "namespace": ref.namespace,
        "labels": {names.MANAGED_BY_LABEL: names.SCHEDULER_NAME},
        "annotations": {names.REFRESHED_AT_ANNOTATION: refreshed_at},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata, "data": {names.BACKENDS_CONFIGMAP_KEY: render(entries)}}


def write_configmap(cluster: ClusterAPI, ref: ConfigMapRef,
                    entries: Mapping[str, Mapping[str, Any]], refreshed_at: str,
                    current: KubeObject | None) -> KubeObject:
    """Create the ConfigMap, or replace ``current`` (a stale version raises Conflict)."""
    if current is None:
        return cluster.create(CONFIGMAPS, configmap_body(ref, entries, refreshed_at),
                              ref.namespace)
    version = str(metadata_of(current).get("resourceVersion") or "")
    return cluster.replace(CONFIGMAPS, configmap_body(ref, entries, refreshed_at, version),
                           ref.namespace)
