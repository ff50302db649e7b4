"""When a record cannot be kept exactly: the cluster is the truth, no bound pod is touched.

kube-scheduler never deletes a pod when it restarts; it rebuilds its cache from
what is bound. Fluence does at least that. When a durable record cannot be
restored exactly (its job ids clash, a node it names changed or went, a vertex it
names is unknown, its annotation cannot be read), or a restored record's promise
cannot be kept (:mod:`~fluence_core.scheduler.restart.promises`), :class:`Fallback`:

* holds each **bound** member conservatively
  (:func:`~fluence_core.scheduler.restart.conservative.hold_running`: what it requests on
  its node, plus the virtual resources it requests on the backend its annotation
  names) as a new record of the same owner, written back, so a gang's bound
  members count toward its minCount and the next restart restores them exactly;
* **releases** only the members not yet bound: they are pending again and are
  placed like any other pod (a gang's with the minCount its bound members leave);
* logs a WARNING that says why, and posts an Event on every member it acts on.

A running member of a group that no record names at all (the record annotation
was removed) is held the same way, with its group.

It never deletes, evicts or releases a bound pod.
"""

from __future__ import annotations

from fluence_core.log import logger
from fluence_core.matcher.base import Allocation
from fluence_core.kube.api import KubeObject
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.restart.conservative import hold_running
from fluence_core.scheduler.events import EventRecorder
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.view import ClusterView

HELD_FROM_POD = "HeldFromPod"
"""Event reason: a bound pod is held from what it requests, its record could not be kept."""
RELEASED = "RecordReleased"
"""Event reason: a pod not yet bound was released from a record that could not be kept."""


class Fallback:
    """Holds the bound members of records that cannot be kept; releases the unbound."""

    def __init__(self, view: ClusterView, records: RecordBook,
                 events: EventRecorder | None) -> None:
        self.view = view
        self.records = records
        self.events = events
        """None for a read-only view (``fluence status``): nothing is posted."""

    def account_unrestored(self) -> None:
        """Hold the pods of every record :meth:`RecordBook.restore` could not restore or read,
        and the running members of a group no record names (its record was removed), at
        start, after the restore and before foreign pods are pinned: held with their group,
        they count toward its minCount."""
        unrestored, self.records.unrestored = self.records.unrestored, []
        for owner, record, why in unrestored:
            self.rehold(owner, record.pods, f"its record cannot be restored: {why}")
        untrusted, self.records.untrusted = self.records.untrusted, []
        for owner, record, why in untrusted:
            self.rehold(owner, record.pods, f"its record is not trusted: {why}")
        unreadable, self.records.unreadable = self.records.unreadable, []
        for owner, why in unreadable:
            self.rehold(owner, self._members_of(owner), f"its record cannot be read: {why}")
        unrecorded: dict[g.Owner, list[str]] = {}
        for key, pod in self.view.pods.items():
            group = g.pod_group_name(pod)
            if (group and g.is_ours(pod) and g.is_bound(pod) and not g.is_finished(pod)
                    and not self.records.covers(key, pod)):
                unrecorded.setdefault(("podgroups", key[0], group), []).append(key[1])
        for owner, members in unrecorded.items():
            self.rehold(owner, members, "has no record naming these running members")

    def account_outgrown(self, lost: dict[int, str]) -> None:
        """A node shrank under held jobs (jobid -> why, :meth:`ClusterView._replace_node`):
        give back the rest of each record or pin holding one, and hold its pods from what
        they request on the node as it is now (what it has left, when they no longer fit)."""
        for owner, held in list(self.records.held.items()):
            for record in list(held):
                hit = next((jobid for jobid in record.jobids if jobid in lost), None)
                if hit is None:
                    continue
                self.view.cancel(record, lost[hit])
                held.remove(record)
                self.rehold(owner, record.pods, f"its placement no longer fits: {lost[hit]}")
        for key, pin in list(self.view.pins.items()):
            if any(jobid in lost for jobid in pin.jobids):
                self.view.unpin(key)
                pod = self.view.pods.get(key)
                if pod is not None:
                    self.view.pin(key, pod)

    def rehold(self, owner: g.Owner, members: list[str], why: str) -> None:
        """Hold ``owner``'s bound ``members`` from what they request, release the unbound ones
        (their record is already given back, or was never held)."""
        namespace = owner[1]
        where = f"{owner[0]}/{namespace}/{owner[2]}"
        bound: list[str] = []
        allocations: dict[str, Allocation] = {}
        for name in members:
            key = (namespace, name)
            pod = self.view.pods.get(key)
            if pod is None or g.is_finished(pod) or owner not in g.owners_of(key, pod):
                continue  # a pod a record names that is not the owner's is held as its own
            if not g.is_bound(pod):
                if not g.is_terminating(pod):
                    self._released(key, pod, where, why)
                continue
            if self.records.covers(key, pod):
                continue
            self.view.unpin(key)  # pinned meanwhile: held with its owner's record instead
            hold = hold_running(self.view.graph, self.view.matcher, pod)
            for kind, allocation in hold.allocations.items():
                allocations[_free_kind(kind, allocations)] = allocation
            bound.append(name)
            node = pod["spec"]["nodeName"]
            held = (f"holds {namespace}/{name} on {node} from what it requests "
                    f"({hold.describe()})" if hold.allocations
                    else f"leaves {namespace}/{name} on {node} running, holding nothing for it")
            message = f"fluence {held}: {where} {why}"
            if hold.problems:
                message += f"; not held: {'; '.join(hold.problems)}"
            logger.warning("%s", message)
            self._post(pod, "Warning", HELD_FROM_POD, message)
        if bound:
            record = HeldPlacement(owner[0], namespace, owner[2], bound, allocations)
            self.records.held.setdefault(owner, []).append(record)
        self.records.write(owner)
        self.view.generation += 1

    def _released(self, key: g.PodKey, pod: KubeObject, where: str, why: str) -> None:
        message = (f"fluence released {key[0]}/{key[1]}, not yet bound, from {where} ({why}); "
                   "it waits to be placed again")
        logger.warning("%s", message)
        self._post(pod, "Warning", RELEASED, message)

    def _members_of(self, owner: g.Owner) -> list[str]:
        """The pods an owner's record would name: the pod itself, or its PodGroup's pods."""
        resource, namespace, name = owner
        if resource == "pods":
            return [name]
        return [key[1] for key, pod in self.view.pods.items()
                if key[0] == namespace and g.pod_group_name(pod) == name]

    def _post(self, pod: KubeObject, type: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.post(pod, type, reason, message)


def _free_kind(kind: str, taken: dict[str, Allocation]) -> str:
    """``kind``, or ``kind-1``, ``kind-2``, ... when a member before took it (``compute-1`` is
    still a compute kind: :func:`~fluence_core.matcher.jobspec.is_compute`)."""
    index = 0
    name = kind
    while name in taken:
        index += 1
        name = f"{kind}-{index}"
    return name
