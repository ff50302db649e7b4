"""The orphan sweep: release gated workers whose scout ended or went away before reporting.

The scout's sidecar fails open (it sends ``release`` until it gets through), but
only while its pod lives. A scout that fails, is evicted or deleted before its
report leaves its group's workers behind the gate with nobody to release them.
Every ``orphan_sweep`` seconds the webhook lists the shared groups' pods (one
list, scouts and workers together), and for each group with workers still behind
Fluence's gate and no live scout (none there, or each one terminal: Succeeded,
Failed, or being deleted) it releases them through
:func:`fluence_core.hybrid.release.release_workers`, the step the report endpoint takes.

* Outcome: ``scout-lost`` (a warning log and a ``ScoutLost`` Event on each worker),
  unless an ended scout had reported a release (a worker the Job made after it):
  then its status, task and session; the backend is the ended scout's (or its claim's).
* A group must look orphaned on **two sweeps in a row**: the Job controller
  creates an Indexed Job's pods in parallel (a worker may be admitted before its
  scout) and replaces a failed scout after a backoff; a scout seen live on the
  second sweep takes the group back.
* Only Fluence's: a scout and its workers are the pods of one Job, by uid
  (:func:`~fluence_core.hybrid.release.controlling_job`); a pod no Job controls is never
  acted on, and a group whose Job still has a live pod running the sidecar is left
  gated even when no pod carries the scout's label (else removing a live scout's
  label would make the sweep release its workers).
* Idempotent: released workers no longer carry the gate, so a finished group is
  never written to again. No API error or bad object stops the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.kube.api import PODS, TERMINAL_PHASES, ClusterAPI, KubeObject
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.hybrid.claims import claimed_backend
from fluence_core.hybrid.release import (
    RELEASE_STATUSES,
    controlling_job,
    release_workers,
    stamp,
)
from fluence_core.settings import Settings
from fluence_core.periodic import Periodic
from fluence_core.kube.meta import annotations_of, labels_of, metadata_of

SELECTOR = (f"{names.ROLE_LABEL} in ({names.ROLE_SCOUT},{names.ROLE_WORKER}),"
            f"{names.GROUP_LABEL}")
"""The shared groups' pods: scouts and workers that carry a group label."""
REASON = "ScoutLost"
"""Reason of the Event on each worker released because its scout was lost."""

GroupKey = tuple[str, str, str]
"""Namespace, group label, uid of the controlling Job ('' without one)."""


def group_key(pod: Mapping[str, Any]) -> GroupKey:
    """Which group a pod belongs to: a worker must share its scout's controlling Job, by
    uid (as :func:`fluence_core.hybrid.release.workers_of` requires); '' for a pod no Job controls,
    which the sweep never acts on."""
    return (str(metadata_of(pod).get("namespace") or ""),
            str(labels_of(pod).get(names.GROUP_LABEL) or ""),
            controlling_job(pod) or "")


def ended(pod: Mapping[str, Any]) -> bool:
    """Terminal (Succeeded, Failed) or being deleted."""
    return bool(metadata_of(pod).get("deletionTimestamp")) or (
        (pod.get("status") or {}).get("phase") in TERMINAL_PHASES)


def gated(pod: Mapping[str, Any], gate: str) -> bool:
    return any(g.get("name") == gate for g in (pod.get("spec") or {}).get("schedulingGates") or [])


@dataclass
class Orphaned:
    """A group with gated workers and no live scout."""

    workers: list[KubeObject] = field(default_factory=list)
    scouts: list[KubeObject] = field(default_factory=list)
    """Its ended scouts still listed (none when deleted)."""

    def outcome(self) -> tuple[dict[str, str], bool]:
        """The workers' stamp, and whether it says the scout was lost."""
        for scout in self.scouts:
            notes = annotations_of(scout)
            status = notes.get(names.SCOUT_STATUS_ANNOTATION)
            if status in RELEASE_STATUSES:  # it reported a release: late workers get it too
                return stamp(scout, status, notes.get(names.SCOUT_JOB_ID_ANNOTATION),
                             notes.get(names.SCOUT_SESSION_ANNOTATION)), False
        return stamp(self.scouts[0] if self.scouts else {}, names.SCOUT_STATUS_LOST), True


def orphaned(pods: Iterable[KubeObject], gate: str) -> dict[GroupKey, Orphaned]:
    """The groups among ``pods`` whose workers wait behind ``gate`` with no live scout."""
    groups: dict[GroupKey, Orphaned] = {}
    live: set[GroupKey] = set()
    for pod in pods:
        key = group_key(pod)
        if not key[2]:
            continue  # no Job controls it: not a split's pod, whatever its labels say
        role = labels_of(pod).get(names.ROLE_LABEL)
        if role == names.ROLE_SCOUT:
            if ended(pod):
                groups.setdefault(key, Orphaned()).scouts.append(pod)
            else:
                live.add(key)
        elif role == names.ROLE_WORKER and gated(pod, gate) and not ended(pod):
            groups.setdefault(key, Orphaned()).workers.append(pod)
    return {key: group for key, group in groups.items() if group.workers and key not in live}


class OrphanSweep(Periodic):
    """The periodic sweep (module docstring); :meth:`start` / :meth:`stop` with the server,
    the first sweep one ``interval`` after the start."""

    thread_name = "orphan-sweep"
    failure = "orphan sweep failed"

    def __init__(self, cluster: ClusterAPI, settings: Settings) -> None:
        super().__init__(settings.hybrid.orphan_sweep)
        self.cluster = cluster
        self.gate = settings.hybrid.quantum_gate
        self._suspects: set[GroupKey] = set()

    def sweep(self) -> list[str]:
        """One sweep: the names of the workers it released."""
        try:
            listed = self.cluster.list(PODS, None, label_selector=SELECTOR).items
        except ApiError as error:
            logger.warning("orphan sweep: cannot list the shared groups' pods: %s", error)
            return []
        found = orphaned(listed, self.gate)
        confirmed = [key for key in found if key in self._suspects]
        self._suspects = set(found)
        released: list[str] = []
        for key in confirmed:
            try:
                released += self._release(key, found[key])
            except ApiError as error:  # the next sweep tries again
                logger.warning("orphan sweep: releasing group %s/%s failed: %s", key[0], key[1],
                               error)
        return released

    def _scout_alive(self, key: GroupKey) -> bool:
        """Whether a live pod of the group's Job still runs the sidecar, whatever its labels
        say: a scout whose role label was removed is still the scout."""
        listed = self.cluster.list(PODS, key[0],
                                   label_selector=f"{names.JOB_UID_LABEL}={key[2]}").items
        return any(not ended(pod) and any(
            c.get("name") == names.SIDECAR_CONTAINER
            for c in (pod.get("spec") or {}).get("containers") or []) for pod in listed)

    def _release(self, key: GroupKey, group: Orphaned) -> list[str]:
        if self._scout_alive(key):
            logger.warning("orphan sweep: group %s/%s has no pod labelled its scout, but a live"
                           " pod of its Job runs the sidecar; its workers stay gated",
                           key[0], key[1])
            return []
        annotations, lost = group.outcome()
        for scout in group.scouts if names.BACKEND_ANNOTATION not in annotations else ():
            annotations.update(claimed_backend(self.cluster, scout))  # its QPU by claim
        done, _running = release_workers(self.cluster, group.workers, self.gate, annotations)
        if not done:
            return done
        where = f"{key[0]}/{key[1]}"
        if not lost:
            logger.info("orphan sweep: group %s's scout had reported %s; released late %s",
                        where, annotations[names.SCOUT_STATUS_ANNOTATION], ", ".join(done))
            return done
        scouts = ", ".join(f"{metadata_of(s).get('name')} ({(s.get('status') or {}).get('phase')})"
                           for s in group.scouts) or "none left"
        logger.warning("orphan sweep: group %s lost its scout before it reported (scouts: %s);"
                       " released %s as %s", where, scouts, ", ".join(done),
                       names.SCOUT_STATUS_LOST)
        message = (f"fluence released this worker of group {key[1]}: its scout ended or went away"
                   f" before reporting (scouts: {scouts})")
        for worker in group.workers:
            if worker["metadata"]["name"] in done:
                self._event(worker, message)
        return done

    def _event(self, worker: KubeObject, message: str) -> None:
        try:
            self.cluster.post_event({"apiVersion": "v1", "kind": "Pod", **worker}, "Warning",
                                    REASON, message)
        except ApiError as error:
            logger.debug("orphan sweep: cannot post %s on %s: %s", REASON,
                         worker["metadata"].get("name"), error)

    def tick(self) -> object:
        return self.sweep()
