"""A scripted vendor queue at the provider boundary, for tests and ``fluence sim``.

A :class:`FakeTask` carries a script of ``(time, position, state)`` steps; the
provider reads the step current at the clock's time, so a queue "moves" in
virtual time without a single real sleep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fluence_core.runtime.provider import Backend, Provider

QUEUED, RUNNING, COMPLETED, FAILED = "QUEUED", "RUNNING", "COMPLETED", "FAILED"


@dataclass
class FakeTask:
    job_id: str
    script: list[tuple[float, int | None, str]]
    """``(from_time, queue position, state)`` steps in time order."""
    appear_at: float = 0.0
    session: str | None = None
    position: int | None = None
    state: str = QUEUED

    def at(self, now: float) -> "FakeTask":
        for t, position, state in self.script:
            if t <= now:
                self.position, self.state = position, state
        return self


@dataclass
class FakeQueueProvider(Provider):
    """Serves ``provider=fake``; tasks by pod uid; ``clock`` is anything with ``now()``."""

    clock: Any
    tasks: dict[str, FakeTask] = field(default_factory=dict)
    name: str = "fake"
    interceptor_module: str = "fluence_core.runtime.fake_interceptor"
    calls: list[str] = field(default_factory=list)

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return attributes.get("provider") == self.name

    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> FakeTask | None:
        self.calls.append("find")
        task = self.tasks.get(pod_uid)
        if task is None or task.appear_at > self.clock.now():
            return None
        return task

    def refresh(self, task: FakeTask) -> FakeTask:
        self.calls.append("refresh")
        return task.at(self.clock.now())

    def queue_position(self, task: FakeTask) -> int | None:
        return task.position if task.state == QUEUED else None

    def is_ready(self, task: FakeTask, position: int) -> bool:
        if task.state in (RUNNING, COMPLETED):
            return True
        return task.state == QUEUED and task.position is not None and task.position <= position

    def task_failed(self, task: FakeTask) -> bool:
        return task.state == FAILED

    def job_id(self, task: FakeTask) -> str:
        return task.job_id

    def session(self, task: FakeTask) -> str | None:
        return task.session
