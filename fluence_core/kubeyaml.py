"""Reading Kubernetes YAML files: single objects, multi-document files and ``List``s.

A ``kubectl get nodes -o yaml`` dump (a ``List``) works as well as hand-written
manifests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from fluence_core.errors import FluenceError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader when PyYAML was built with it (ten times faster on node dumps)."""


def read_objects(path: Path | str, kind: str | None = None) -> list[dict[str, Any]]:
    """Every object in the file (``List`` items flattened), optionally of one kind."""
    try:
        documents = list(yaml.load_all(Path(path).read_text(), Loader=_Loader))
    except OSError as error:
        raise FluenceError(f"{path}: cannot read: {error.strerror or error}") from None
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
