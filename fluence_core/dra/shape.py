"""Parts of a DRA object read with their shape checked, one way for slices and claims.

A string or a mapping where a list belongs is iterable too, and a list where an object
belongs has no ``get``: read without a check, either becomes a wrong device or claim, or
an exception that names nothing. These return the part (absent reads as empty) or raise
a ValueError naming where it is, which the caller turns into the pod's reason or a log
line naming the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def object_at(raw: Any, where: str) -> Mapping[str, Any]:
    """``raw`` as an object (absent: empty); ValueError naming ``where`` otherwise."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} is not an object")
    return raw


def list_at(raw: Any, where: str) -> list[Any]:
    """``raw`` as a list (absent: empty); ValueError naming ``where`` otherwise."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"{where} is not a list")
    return raw
