"""Owner references for objects made at CREATE, when the owner has no uid yet.

An ownerReference needs the owner's uid, which the API server assigns only after
every admission webhook has answered. The handler therefore creates the
ConfigMap, Secret and Service during admission (so they exist before the first
pod is made, and a pod never waits on a missing volume) and hands them to an
:class:`Adopter`: a background thread that waits for the Job or JobSet to be
stored, then patches an ownerReference to it into each one, so Kubernetes'
garbage collector deletes them with it. If the owner never appears (a later
webhook or validation refused it) the objects are deleted.

Why not create them later from a controller: the webhook is the only Fluence
process guaranteed to see the workload, and creating them up front keeps the
pods' first start free of races. What is left: a webhook that dies inside the
wait leaves unowned objects behind (labelled ``managed-by: fluence``; see the
README).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fluence_core.api import ClusterAPI, NotFound, Resource, logger


@dataclass(frozen=True)
class Adoption:
    """Dependents to give to ``owner`` once it is stored."""

    cluster: ClusterAPI
    owner: Resource
    name: str
    namespace: str
    dependents: Sequence[tuple[Resource, str]]
    timeout: float


def owner_reference(owner: Resource, stored: dict[str, object]) -> dict[str, object]:
    meta = stored.get("metadata") or {}
    assert isinstance(meta, dict)
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": meta["name"],
        "uid": meta["uid"],
    }


def adopt_now(job: Adoption) -> bool:
    """One attempt: True when the owner existed and every dependent now points at it."""
    stored = job.cluster.get(job.owner, job.name, job.namespace)
    if stored is None or not (stored.get("metadata") or {}).get("uid"):
        return False
    reference = owner_reference(job.owner, stored)
    for resource, name in job.dependents:
        try:
            job.cluster.patch(resource, name, {"metadata": {"ownerReferences": [reference]}},
                              job.namespace)
        except NotFound:
            logger.warning("flux: %s %s/%s vanished before it could be owned", resource.kind,
                           job.namespace, name)
    logger.info("flux: %s owned by %s %s/%s", ", ".join(n for _, n in job.dependents),
                job.owner.kind, job.namespace, job.name)
    return True


def abandon(job: Adoption) -> None:
    """The owner never came: delete what was made for it."""
    for resource, name in job.dependents:
        try:
            job.cluster.delete(resource, name, job.namespace)
        except Exception as error:  # best effort, logged
            logger.warning(
                "flux: could not delete %s %s/%s: %s", resource.kind, job.namespace, name, error
            )
    logger.warning("flux: %s %s/%s was not stored within %.0fs; deleted %s", job.owner.kind,
                   job.namespace, job.name, job.timeout, ", ".join(n for _, n in job.dependents))


@dataclass
class _Waiting:
    job: Adoption
    deadline: float
    due: float
    interval: float


@dataclass
class Adopter:
    """Adoptions waiting for their owners, served by one background worker, off the request path.

    The queue is bounded (``capacity``): past it a new adoption is refused at once, its
    objects deleted, instead of one more thread polling for a minute. Each waiting
    owner is looked up with a backoff (``poll`` doubling to ``max_poll``), and an
    adoption past its timeout is abandoned, so the queue prunes itself. ``spawn``,
    ``sleep`` and ``clock`` are replaceable for tests (virtual time).
    """

    poll: float = 0.2
    max_poll: float = 5.0
    capacity: int = 1000
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    spawn: Callable[[Callable[[], None]], None] | None = None
    started: list[Adoption] = field(default_factory=list)
    _waiting: list[_Waiting] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _working: bool = field(default=False, init=False, repr=False)

    @property
    def waiting(self) -> int:
        """Adoptions queued now."""
        with self._lock:
            return len(self._waiting)

    @property
    def full(self) -> bool:
        return self.waiting >= self.capacity

    def submit(self, job: Adoption) -> bool:
        """Queue ``job``; False (and its objects deleted) when the queue is full."""
        now = self.clock()
        with self._lock:
            if len(self._waiting) >= self.capacity:
                refused = True
            else:
                refused = False
                self.started.append(job)
                self._waiting.append(_Waiting(job, now + job.timeout, now, self.poll))
                start, self._working = not self._working, True
        if refused:
            logger.error("flux: %d adoptions are waiting already; not waiting for %s/%s",
                         self.capacity, job.namespace, job.name)
            abandon(job)
            return False
        if start:
            if self.spawn is not None:
                self.spawn(self._work)
            else:
                threading.Thread(target=self._work, name="flux-adopt", daemon=True).start()
        return True

    def _work(self) -> None:
        """Serve the queue until it is empty; every owner is looked up when it is due."""
        while True:
            now = self.clock()
            with self._lock:
                if not self._waiting:
                    self._working = False
                    return
                due = [w for w in self._waiting if w.due <= now]
            for waiting in due:
                done = self._attempt(waiting, now)
                with self._lock:
                    if done:
                        self._waiting.remove(waiting)
            with self._lock:
                upcoming = min((w.due for w in self._waiting), default=now)
            self.sleep(max(0.0, min(upcoming - self.clock(), self.max_poll)) or 0.0)

    def _attempt(self, waiting: _Waiting, now: float) -> bool:
        """One look at the owner: True when the adoption is finished (adopted or abandoned)."""
        job = waiting.job
        try:
            if adopt_now(job):
                return True
        except Exception as error:  # a flaky API: keep trying until the deadline
            logger.warning("flux: adopting for %s/%s: %s", job.namespace, job.name, error)
        if now >= waiting.deadline:
            abandon(job)
            return True
        waiting.interval = min(waiting.interval * 2, self.max_poll)
        waiting.due = min(now + waiting.interval, waiting.deadline)
        return False
