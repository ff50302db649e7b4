"""Reading Kubernetes YAML files: single objects, multi-document files and ``List``s.

A ``kubectl get nodes -o yaml`` dump (a ``List``) works as well as hand-written
manifests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from fluence_core import yamlfile
from fluence_core.errors import FluenceError


def read_objects(path: Path | str, kind: str | None = None) -> list[dict[str, Any]]:
    """Every object in the file (``List`` items flattened), optionally of one kind."""
    text = yamlfile.read_text(path)
    try:
        documents = yamlfile.load_all(text)
    except yaml.YAMLError as error:
        raise FluenceError(f"{path}: not valid YAML: {error}") from None
    objects = list(_flatten(documents))
    if kind is not None:
        objects = [o for o in objects if o.get("kind", kind) == kind]
    return objects


def _flatten(documents: list[Any]) -> Iterator[dict[str, Any]]:
    for document in documents:
        if not isinstance(document, dict):
            continue
        if document.get("kind", "").endswith("List") or (
            "items" in document and "kind" not in document
        ):
            yield from _flatten(document.get("items") or [])
        else:
            yield document
