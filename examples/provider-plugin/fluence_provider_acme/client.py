"""Acme's REST API, the provider's vendor boundary (tests hand the provider a fake client).

Two calls serve the sidecar: list the tasks carrying a label, and read one task.
A task is ``{"id", "status", "position", "created"}``; ``status`` is one of
``QUEUED``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELLED``; ``position``
(1 = next) is reported while queued, ``">500"`` past what Acme counts.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from typing import Any, Protocol

DEFAULT_ENDPOINT = "https://api.acme-quantum.example/v1"
TOKEN = "ACME_TOKEN"


class AcmeClient(Protocol):
    """What the provider needs from Acme."""

    def list_tasks(self, label: str) -> list[dict[str, Any]]:
        """Every task labelled ``label`` (``key=value``), newest last."""
        ...

    def get_task(self, task_id: str) -> dict[str, Any]:
        """One task's current state."""
        ...


class HttpAcmeClient:
    """The real API over HTTPS, with the user's ``ACME_TOKEN``."""

    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, timeout: float = 10.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self.endpoint + path, headers={
            "Authorization": f"Bearer {os.environ.get(TOKEN, '')}", "Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.load(response)

    def list_tasks(self, label: str) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"label": label})
        found: list[dict[str, Any]] = self._get(f"/tasks?{query}")["tasks"]
        return found

    def get_task(self, task_id: str) -> dict[str, Any]:
        task: dict[str, Any] = self._get("/tasks/" + urllib.parse.quote(task_id, safe=""))
        return task
