"""Simulated vendor queues, served to the real sidecar and ``fluence select`` as a Provider.

The fake sits exactly at the provider boundary
(:class:`~fluence_core.runtime.provider.Provider`): the sidecar finds, polls and
judges tasks through the same calls it makes against Braket or QRMI, and
``fluence select`` reads prices and queue depths through ``backend_info``.

Each backend is one FIFO server. A task submitted at ``t`` finds ``k`` tasks
ahead of it (exponential around the backend's mean depth, resampled every
``depth_period``), each taking a service time; then it runs for
``task_overhead + shots x shot_time``. Outages pause the server for long
stretches. Every draw comes from a generator keyed by the run's seed and the
backend (never by the arm), so paired arms meet the very same queue.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fluence_core.runtime.provider import Backend, BackendInfo, Provider
from fluence_core.sim.scenario import BackendModel


def stable_rng(*parts: object) -> random.Random:
    """A generator seeded from ``parts`` the same way in every process (no hash salt)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass
class SimTask:
    """One task in a simulated queue; its whole future is known at submission."""

    job_id: str
    backend: str
    pod_uid: str
    submitted: float
    ahead_starts: list[float]
    """When each task ahead of it starts service (sorted)."""
    start: float
    done: float
    failed: bool
    shots: int
    cost: float

    def position(self, now: float) -> int | None:
        """1 = next to run; None once running or finished."""
        if now >= self.start:
            return None
        return 1 + len(self.ahead_starts) - bisect.bisect_right(self.ahead_starts, now)

    def state(self, now: float) -> str:
        if now < self.start:
            return "QUEUED"
        if now < self.done:
            return "RUNNING"
        return "FAILED" if self.failed else "COMPLETED"


class BackendQueue:
    """One vendor backend's queue (see the module docstring)."""

    def __init__(self, name: str, model: BackendModel, seed: object) -> None:
        self.name = name
        self.model = model
        self.seed = seed
        self._outages: list[tuple[float, float]] = []
        self._outage_rng = stable_rng(seed, name, "outages")
        self._outages_until = 0.0
        self._task_rng = stable_rng(seed, name, "tasks")
        self._last_done = 0.0
        self._serial = 0
        self.tasks: list[SimTask] = []

    # -- the background ----------------------------------------------------------

    def depth_at(self, now: float) -> int:
        """Tasks waiting at ``now`` (what a vendor reports as the queue depth)."""
        if self.model.depth <= 0:
            return 0
        period = math.floor(now / self.model.depth_period)
        rng = stable_rng(self.seed, self.name, "depth", period)
        return int(rng.expovariate(1.0 / self.model.depth))

    def _outages_to(self, until: float) -> None:
        spec = self.model.outages
        if spec is None:
            return
        while self._outages_until <= until:
            start = self._outages_until + self._outage_rng.expovariate(1.0 / spec.every)
            length = self._outage_rng.uniform(spec.duration.min, spec.duration.max)
            self._outages.append((start, start + length))
            self._outages_until = start + length

    def online_at(self, now: float) -> bool:
        self._outages_to(now)
        return not any(start <= now < end for start, end in self._outages)

    def advance(self, t: float, work: float) -> float:
        """When ``work`` seconds of service starting at ``t`` are done, outages skipped."""
        if self.model.outages is None:
            return t + work
        while True:
            self._outages_to(t + work)
            upcoming = [(s, e) for s, e in self._outages if e > t]
            if not upcoming:
                return t + work
            start, end = upcoming[0]
            if start <= t:
                t = end
                continue
            if t + work <= start:
                return t + work
            work -= start - t
            t = end

    # -- our tasks -----------------------------------------------------------------

    def submit(self, now: float, pod_uid: str, shots: int) -> SimTask:
        """Queue a task: its start, end and fate are drawn now, in submission order."""
        rng = self._task_rng
        model = self.model
        ahead = self.depth_at(now)
        starts: list[float] = []
        t = now
        for _ in range(ahead):
            starts.append(t)
            t = self.advance(t, rng.uniform(model.service.min, model.service.max))
        if self._last_done > t:  # our own earlier tasks are still ahead
            starts.append(t)
            t = self._last_done
        run = model.task_overhead + shots * model.shot_time
        done = self.advance(t, run)
        failed = rng.random() < model.failure_rate
        self._last_done = done
        self._serial += 1
        cost = model.price_per_task + shots * model.price_per_shot
        task = SimTask(
            f"sim:{self.name}:task/{self._serial:05d}",
            self.name,
            pod_uid,
            now,
            starts,
            t,
            done,
            failed,
            shots,
            cost,
        )
        self.tasks.append(task)
        return task

    def info(self, now: float) -> BackendInfo:
        return BackendInfo(self.name, price_per_shot=self.model.price_per_shot,
                           price_per_task=self.model.price_per_task, queue=self.depth_at(now),
                           status="online" if self.online_at(now) else "offline",
                           qubits=self.model.qubits or None, source="sim")


@dataclass
class SimQueueProvider(Provider):
    """The simulated vendors as a :class:`Provider` (``now`` is the simulation clock)."""

    now: Callable[[], float]
    queues: Mapping[str, BackendQueue]
    name: str = "sim"
    by_uid: dict[str, SimTask] = field(default_factory=dict)

    def submit(self, backend: str, pod_uid: str, shots: int) -> SimTask:
        """What the interceptor-tagged SDK call does: a task carrying the pod's uid."""
        task = self.queues[backend].submit(self.now(), pod_uid, shots)
        self.by_uid[pod_uid] = task
        return task

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return attributes.get("backend") in self.queues

    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> SimTask | None:
        task = self.by_uid.get(pod_uid)
        return task if task is not None and task.submitted <= self.now() else None

    def queue_position(self, task: SimTask) -> int | None:
        return task.position(self.now())

    def is_ready(self, task: SimTask, position: int) -> bool:
        now = self.now()
        if now >= task.start:
            return True
        found = task.position(now)
        return found is not None and found <= position

    def task_failed(self, task: SimTask) -> bool:
        return task.state(self.now()) == "FAILED"

    def job_id(self, task: SimTask) -> str:
        return task.job_id

    def backend_info(self, backend: Backend) -> BackendInfo | None:
        queue = self.queues.get(backend.name)
        return queue.info(self.now()) if queue is not None else None

    def describe(self, task: SimTask) -> str:
        return f"{task.job_id} {task.state(self.now())}"
