"""The durable record: what a group holds, written on the object that owns it.

A restarted scheduler reads these annotations back and re-holds exactly what
they say before it places anything new, so it never double-allocates. A gang's
record lives on its PodGroup, a lone pod's on the pod.

A lone pod that holds only compute writes no record: its binding says where it
runs, as kube-scheduler keeps it, and a restarted scheduler re-holds it from
there (see :meth:`fluence_core.scheduler.view.ClusterView.pin`). That saves a
write and a watch event per pod. A lone pod holding a virtual resource keeps
its record, which names the very vertex it holds.

:class:`RecordBook` keeps every record the scheduler holds, by owner, and is the
one place that writes them back (after a commit, a release or a preemption)
and reads them at start (:meth:`RecordBook.restore`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.cluster_api import ClusterAPI
from fluence_core.errors import FluenceError
from fluence_core.kube_errors import ApiError, NotFound
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.models import KubeObject
from fluence_core.scheduler import groups as g

Alive = Callable[[str, str], bool]
"""``alive(namespace, pod)``: whether the cluster view has that pod, not finished."""


@dataclass
class HeldPlacement:
    """One placement of some members of a group, and the allocations behind it."""

    owner_resource: str
    """``podgroups`` or ``pods``."""
    namespace: str
    owner: str
    pods: list[str]
    allocations: dict[str, Allocation] = field(default_factory=dict)

    @property
    def durable(self) -> bool:
        """Written on its owner: a gang's placement, or one holding a virtual resource."""
        return self.owner_resource == "podgroups" or any(
            a.virtual for a in self.allocations.values())

    @property
    def jobids(self) -> list[int]:
        return sorted(a.jobid for a in self.allocations.values())

    def to_record(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "allocations": {kind: json.loads(a.to_json()) for kind, a in self.allocations.items()},
        }


def read_records(owner_resource: str, obj: KubeObject) -> list[HeldPlacement]:
    """The placements recorded on ``obj``; a malformed record raises ValueError naming it."""
    metadata = obj.get("metadata") or {}
    raw = (metadata.get("annotations") or {}).get(names.ALLOCATION_ANNOTATION)
    if not raw:
        return []
    where = f"{owner_resource}/{metadata.get('namespace')}/{metadata.get('name')}"
    try:
        entries = json.loads(raw)
        return [
            HeldPlacement(
                owner_resource, metadata.get("namespace") or "default", metadata.get("name") or "",
                [str(p) for p in entry["pods"]],
                {kind: Allocation.from_json(a) for kind, a in entry["allocations"].items()},
            )
            for entry in entries
        ]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{where}: unreadable {names.ALLOCATION_ANNOTATION}: {error}") from None


def record_annotations(placements: list[HeldPlacement]) -> dict[str, str | None]:
    """The annotations that record ``placements`` (None values remove them)."""
    if not placements:
        return {names.ALLOCATION_ANNOTATION: None, names.JOBIDS_ANNOTATION: None}
    jobids = sorted(j for p in placements for j in p.jobids)
    return {
        names.ALLOCATION_ANNOTATION: json.dumps([p.to_record() for p in placements],
                                                separators=(",", ":")),
        names.JOBIDS_ANNOTATION: ",".join(str(j) for j in jobids),
    }


class RecordBook:
    """Every placement the scheduler holds, by the object that records it.

    The caller serialises access (the scheduler's lock); writing goes through
    the cluster wrapper and is skipped for a read-only view (``fluence status``).
    """

    def __init__(self, cluster: ClusterAPI, *, read_only: bool = False) -> None:
        self.cluster = cluster
        self.read_only = read_only
        self.held: dict[g.Owner, list[HeldPlacement]] = {}
        self.unrestored: list[tuple[g.Owner, HeldPlacement, str]] = []
        """Records :meth:`restore` could not hold again, and why: promises already broken
        (:class:`~fluence_core.scheduler.promises.PromiseKeeper` releases their gangs)."""
        self._written: set[g.Owner] = set()
        """Owners whose object carries a record now (read at start or written since)."""

    def covers(self, key: g.PodKey, pod: KubeObject) -> bool:
        """Whether a held record names this pod: looks only where its record can live."""
        return any(key[1] in record.pods for owner in g.owners_of(key, pod)
                   for record in self.held.get(owner, ()))

    def annotations(self, owner: g.Owner) -> dict[str, str | None]:
        """The annotations to write on ``owner`` now: its durable records, or their removal
        when it carried some; empty when it has nothing to write."""
        durable = [r for r in self.held.get(owner, []) if r.durable]
        if not durable and owner not in self._written:
            return {}
        if durable:
            self._written.add(owner)
        else:
            self._written.discard(owner)
        return record_annotations(durable)

    def write(self, owner: g.Owner) -> None:
        """Write ``owner``'s records back to it (a gone owner needs none)."""
        if self.read_only:
            return
        annotations = self.annotations(owner)
        if not annotations:
            return
        resource, namespace, name = owner
        patch = {"metadata": {"annotations": annotations}}
        try:
            self.cluster.patch(resource, name, patch, namespace)
        except NotFound:
            pass
        except ApiError as error:
            logger.error("cannot write the record on %s %s/%s: %s",
                         resource, namespace, name, error)

    def restore(self, owners: Iterable[tuple[str, KubeObject]], matcher: Matcher,
                alive: Alive) -> None:
        """Re-hold every recorded placement whose pods still live; drop the rest.

        ``owners`` are ``(resource plural, object)`` pairs that may carry a
        record: the PodGroups and Fluence's own pods.
        """
        for owner_resource, obj in owners:
            try:
                records = read_records(owner_resource, obj)
            except ValueError as error:
                logger.error("ignoring a record: %s", error)
                continue
            if not records:
                continue
            namespace, name = g.pod_key(obj)
            self._written.add((owner_resource, namespace, name))
            kept = []
            for record in records:
                if not any(alive(namespace, pod) for pod in record.pods):
                    logger.info("Cancel jobid %s: the pods of %s/%s are gone",
                                record.jobids, namespace, name)
                    continue
                try:
                    for allocation in record.allocations.values():
                        matcher.restore(allocation)
                except FluenceError as error:
                    logger.error("cannot restore %s/%s jobids %s: %s",
                                 namespace, name, record.jobids, error)
                    for allocation in record.allocations.values():
                        matcher.cancel(allocation.jobid)  # what restored before the failure
                    self.unrestored.append(((owner_resource, namespace, name), record, str(error)))
                    continue
                logger.info("restored jobids %s for %s/%s", record.jobids, namespace, name)
                kept.append(record)
            self.held[(owner_resource, namespace, name)] = kept
            if len(kept) != len(records):
                self.write((owner_resource, namespace, name))

    def held_members(self, alive: Alive) -> Mapping[g.PodKey, int]:
        """Members each PodGroup already has placed and alive (computed when asked)."""
        return _HeldMembers(self.held, alive)


class _HeldMembers(Mapping[g.PodKey, int]):
    """Members each PodGroup already has placed and alive, counted only for the groups asked
    about (a cycle asks for the pending gangs, not for every group ever held)."""

    def __init__(self, held: Mapping[g.Owner, list[HeldPlacement]], alive: Alive) -> None:
        self._held = held
        self._alive = alive

    def __getitem__(self, key: g.PodKey) -> int:
        namespace, owner = key
        records = self._held.get(("podgroups", namespace, owner))
        if records is None:
            raise KeyError(key)
        return sum(1 for r in records for p in r.pods if self._alive(namespace, p))

    def __iter__(self) -> Iterator[g.PodKey]:
        return ((ns, owner) for (resource, ns, owner) in self._held if resource == "podgroups")

    def __len__(self) -> int:
        return sum(1 for _ in self)
