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
class Adopter:
    """Runs adoptions on daemon threads (``spawn`` and ``sleep`` are replaceable for tests)."""

    poll: float = 0.2
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    spawn: Callable[[Callable[[], None]], None] | None = None
    started: list[Adoption] = field(default_factory=list)

    def submit(self, job: Adoption) -> None:
        self.started.append(job)
        def run() -> None:
            self.run(job)

        if self.spawn is not None:
            self.spawn(run)
        else:
            threading.Thread(target=run, name=f"flux-adopt-{job.name}", daemon=True).start()

    def run(self, job: Adoption) -> bool:
        """Wait for the owner, then adopt; on timeout abandon. True when adopted."""
        deadline = self.clock() + job.timeout
        while True:
            try:
                if adopt_now(job):
                    return True
            except Exception as error:  # a flaky API: keep trying until the deadline
                logger.warning("flux: adopting for %s/%s: %s", job.namespace, job.name, error)
            if self.clock() >= deadline:
                abandon(job)
                return False
            self.sleep(self.poll)
