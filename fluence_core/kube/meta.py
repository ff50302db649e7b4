"""An object's metadata, read one way everywhere.

Objects reach Fluence as decoded JSON, and any part of ``metadata`` may be absent:
a body being built, a pod not yet admitted, a hostile review. Every module reads
``metadata``, its labels, its annotations and its owner references through these
functions, which treat an absent part as empty, rather than spelling the guards
out inline; an object that may not even be a mapping (what a watch delivers) is read
with :func:`metadata_or_none`. They only read, except :func:`writable_metadata`, the
one way to get an object's own ``metadata`` to write into.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's ``metadata``; empty when it has none."""
    return obj.get("metadata") or {}


_MAPPINGS = (dict, Mapping)
"""``dict`` first: decoded JSON is one, and the check of an ABC costs several times more
on a path every watch event takes."""


def metadata_or_none(obj: object) -> Mapping[str, Any] | None:
    """The metadata of an object of any shape, or None when ``obj`` is not a mapping or its
    ``metadata`` is not one: for code that must outlive whatever a watch, a list or a
    review carries (a watch loop, an informer, a log line naming the object), where an
    object without readable metadata is told apart rather than read as empty."""
    if not isinstance(obj, _MAPPINGS):
        return None
    meta = obj.get("metadata")
    return meta if isinstance(meta, _MAPPINGS) else None


def writable_metadata(obj: MutableMapping[str, Any]) -> dict[str, Any]:
    """The object's own ``metadata``, to write into: an empty one is put in place when it
    has none (absent, or ``null`` as a review may carry it), so what is written stays."""
    meta: dict[str, Any] | None = obj.get("metadata")
    if not meta:
        meta = obj["metadata"] = {}
    return meta


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The object's labels; empty when it has none."""
    return metadata_of(obj).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The object's annotations; empty when it has none."""
    return metadata_of(obj).get("annotations") or {}


def owner_references_of(obj: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The object's owner references; empty when it has none."""
    return metadata_of(obj).get("ownerReferences") or []


def controller_reference(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reference to the object's controller, or None.

    That is the owner reference with ``controller: true`` (the API server allows
    one) and a uid and a name, as controllers write it: a uid cannot be guessed
    from a name, so only a reference that carries one says who really controls
    the object. Malformed references (not a list, not a mapping) count as none.
    """
    refs = metadata_of(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if (isinstance(ref, Mapping) and ref.get("controller") is True
                and ref.get("uid") and ref.get("name")):
            return ref
    return None


def job_controller_reference(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reference to the ``batch`` Job that controls the object (:func:`controller_reference`),
    or None when no Job does."""
    ref = controller_reference(obj)
    if ref is None or ref.get("kind") != "Job":
        return None
    return ref if str(ref.get("apiVersion", "")).startswith("batch/") else None
