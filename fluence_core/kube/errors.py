"""Errors from the Kubernetes API, as Fluence's own exceptions.

Both implementations of :class:`fluence_core.kube.api.ClusterAPI` raise
these, so a caller handles "someone bound it first" (Conflict) the same way
against a real server and the in-memory fake, and nothing outside the wrapper
ever catches a ``kubernetes`` client exception.
"""

from __future__ import annotations

import json
from typing import Any

from fluence_core.errors import FluenceError


class ApiError(FluenceError):
    """The API server refused a request; ``status`` is the HTTP code (0: no response)."""

    def __init__(self, status: int, message: str, reason: str = "",
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.message = message
        self.reason = reason
        self.body = body or {}


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: the name is taken, the resourceVersion is stale, or the pod is bound or gated."""


class Gone(ApiError):
    """410: the requested resourceVersion is older than the server's history."""


_BY_STATUS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone}


def status_error(status: int, body: dict[str, Any] | str | bytes | None = None) -> ApiError:
    """The exception for an HTTP status and its ``Status`` body (JSON text or decoded)."""
    decoded: dict[str, Any] = {}
    if isinstance(body, (bytes, str)):
        try:
            loaded = json.loads(body)
            decoded = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            decoded = {
                "message": body.decode(errors="replace") if isinstance(body, bytes) else body
            }
    elif isinstance(body, dict):
        decoded = body
    # A watch stream reports expiry as an ERROR event whose Status says 410 even
    # though the HTTP response was 200; the Status code wins when present.
    code = int(decoded.get("code") or status)
    message = str(decoded.get("message") or "")
    reason = str(decoded.get("reason") or "")
    return _BY_STATUS.get(code, ApiError)(code, message, reason, decoded)
