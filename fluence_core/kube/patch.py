"""A small RFC 6902 JSON patch: build pointers and apply add/remove/replace/test.

Fluence's one implementation. Webhook handlers see the pod as left by the
handlers before them, so the admission service applies each handler's patch to
its working copy; the API server applies the joined list to the real object,
operation by operation, with the same result. The in-memory API
(:mod:`~fluence_core.kube.fake`) applies the JSON patches Fluence sends it with
the same code.
"""

from __future__ import annotations

from typing import Any

JsonPatch = list[dict[str, Any]]


def pointer(*parts: str | int) -> str:
    """A JSON pointer from raw path parts (``~`` and ``/`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _parts(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, adding: bool) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit():
        raise ValueError(f"bad list index {token!r}")
    index = int(token)
    if index > len(container) or (not adding and index == len(container)):
        raise ValueError(f"list index {index} out of range")
    return index


def apply_patch(doc: Any, ops: JsonPatch) -> Any:
    """Apply ``ops`` to ``doc`` in place (the root itself is never replaced) and return it."""
    for op in ops:
        kind = op.get("op")
        parts = _parts(op["path"])
        if not parts:
            raise ValueError("patching the document root is not supported")
        parent = doc
        for token in parts[:-1]:
            parent = (
                parent[_index(parent, token, adding=False)]
                if isinstance(parent, list)
                else parent[token]
            )
        last = parts[-1]
        if kind in ("add", "replace"):
            value = op["value"]
            if isinstance(parent, list):
                if kind == "add":
                    parent.insert(_index(parent, last, adding=True), value)
                else:
                    parent[_index(parent, last, adding=False)] = value
            else:
                if kind == "replace" and last not in parent:
                    raise ValueError(f"replace of missing member {op['path']}")
                parent[last] = value
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[_index(parent, last, adding=False)]
            else:
                del parent[last]
        elif kind == "test":
            current = (
                parent[_index(parent, last, adding=False)]
                if isinstance(parent, list)
                else parent[last]
            )
            if current != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        else:
            raise ValueError(f"unsupported JSON patch op {kind!r}")
    return doc
