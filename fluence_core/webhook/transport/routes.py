"""What a webhook HTTPS server answers a POST with: an :class:`Endpoint`, all the server knows.

The server (:mod:`~fluence_core.webhook.transport.server`) reads a request and hands its path,
headers and body to its endpoint; it imports nothing of admission or of the scouts'
reports. The webhook process runs two servers: one whose endpoint is
admission (:class:`~fluence_core.webhook.admission.review.AdmissionEndpoint`, for the API server
alone), and one whose endpoint is :class:`Routes`, the JSON routes plugins contribute
through ``fluence_webhook_routes`` (the scouts' reports), for pods. So the admission port
can be closed to everyone but the API server, and a plugin that is disabled serves
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from fluence_core.errors import FluenceError


@dataclass(frozen=True)
class Reply:
    """HTTP status and JSON body."""

    status: int
    body: dict[str, Any]


class Endpoint(Protocol):
    """What a server hands a POST to, once its head is read and checked."""

    def limit(self, path: str) -> int | None:
        """Bytes a POST to ``path`` may carry; ``None``: no such path (answered 404, unread)."""
        ...

    def post(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """The answer to a POST read whole (``headers`` by lower-case name); never raises
        for anything the client sent."""
        ...

    def error(self, path: str, status: int, message: str) -> dict[str, Any]:
        """The JSON body of an error the server answers itself (bad head, too long...)."""
        ...


@runtime_checkable
class Route(Protocol):
    """One JSON endpoint a plugin contributes (``fluence_webhook_routes``): served on the
    webhook's report port (``FLUENCE_REPORT_PORT``), never on the admission port."""

    path: str
    """The exact path, such as ``/v1/scout-report``."""
    max_body: int
    """Bytes a request's body may have; a longer one is answered 413 unread."""

    def post(self, headers: Mapping[str, str], body: bytes) -> Reply:
        """The answer; errors are answers too (a JSON body with ``error`` and ``code``)."""
        ...


class Routes:
    """The contributed routes, by exact path; an error is ``{"error": ..., "code": ...}``."""

    def __init__(self, routes: Sequence[Route] = ()) -> None:
        self.by_path: dict[str, Route] = {}
        for route in routes:
            if not isinstance(route, Route):
                raise FluenceError(f"webhook route {route!r} is not a Route (path, max_body, "
                                   f"post(headers, body))")
            if route.path in self.by_path:
                raise FluenceError(f"two webhook routes serve {route.path!r}")
            self.by_path[route.path] = route

    def limit(self, path: str) -> int | None:
        route = self.by_path.get(path)
        return None if route is None else route.max_body

    def post(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        return self.by_path[path].post(headers, body)

    def error(self, path: str, status: int, message: str) -> dict[str, Any]:
        return {"error": message, "code": status}
