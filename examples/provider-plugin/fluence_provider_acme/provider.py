"""The Acme provider's sidecar half: find the scout's task, follow it through the queue."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fluence_core.api import Backend, Provider, parse_queue_position

from fluence_provider_acme.client import DEFAULT_ENDPOINT, AcmeClient, HttpAcmeClient
from fluence_provider_acme.interceptor import KEY

READY = frozenset({"RUNNING", "COMPLETED"})
FAILED = frozenset({"FAILED", "CANCELLED"})


@dataclass(frozen=True)
class AcmeTask:
    """One Acme task as the sidecar holds it between polls."""

    id: str
    status: str
    position: int | None
    endpoint: str


@dataclass
class AcmeProvider(Provider):
    """Serves backends with ``provider: acme``; ``endpoint`` (an attribute in
    resources.yaml) picks the API, ``client_for(endpoint)`` builds its client."""

    client_for: Callable[[str], AcmeClient] = HttpAcmeClient
    name: str = "acme"
    interceptor_module: str = "fluence_provider_acme.interceptor"
    interceptor_match: Mapping[str, str] = field(default_factory=lambda: {"provider": "acme"})

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return attributes.get("provider") == "acme"

    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> AcmeTask | None:
        endpoint = backend.attributes.get("endpoint") or DEFAULT_ENDPOINT
        tasks = self.client_for(endpoint).list_tasks(f"{KEY}={pod_uid}")
        if not tasks:
            return None
        first = min(tasks, key=lambda task: str(task.get("created", "")))  # the scout's first task
        return self._task(first, endpoint)

    def refresh(self, task: AcmeTask) -> AcmeTask:
        return self._task(self.client_for(task.endpoint).get_task(task.id), task.endpoint)

    @staticmethod
    def _task(raw: Mapping[str, object], endpoint: str) -> AcmeTask:
        status = str(raw.get("status") or "QUEUED")
        position = parse_queue_position(raw.get("position")) if status == "QUEUED" else None
        return AcmeTask(str(raw["id"]), status, position, endpoint)

    def queue_position(self, task: AcmeTask) -> int | None:
        return task.position

    def is_ready(self, task: AcmeTask, position: int) -> bool:
        if task.status in READY:
            return True
        return task.position is not None and task.position <= position

    def task_failed(self, task: AcmeTask) -> bool:
        return task.status in FAILED

    def job_id(self, task: AcmeTask) -> str:
        return task.id

    def describe(self, task: AcmeTask) -> str:
        return f"acme task {task.id} {task.status} position={task.position}"
