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
from fluence_core.kube.api import ClusterAPI
from fluence_core.errors import FluenceError
from fluence_core.graph import ResourceGraph
from fluence_core.kube.errors import ApiError, NotFound
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.matcher.pooled import restores_later
from fluence_core.kube.api import KubeObject
from fluence_core.scheduler import groups as g
from fluence_core.kube.meta import annotations_of, metadata_of

Alive = Callable[[str, str], bool]
"""``alive(namespace, pod)``: whether the cluster view has that pod, not finished."""
Vet = Callable[[g.Owner, "HeldPlacement"], "str | None"]
"""``vet(owner, record)``: why the record cannot be trusted, or None
(:func:`~fluence_core.scheduler.restart.trust.distrust`)."""


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
    metadata = metadata_of(obj)
    raw = annotations_of(obj).get(names.ALLOCATION_ANNOTATION)
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


def outgrown(allocation: Allocation, graph: ResourceGraph) -> str | None:
    """Why ``allocation`` cannot be held where it says because the graph changed under it (a
    node it names is gone or has shrunk below the vertices it names, a virtual vertex is
    gone), or None. Expected when nodes change; what holds its pods then is
    :mod:`~fluence_core.scheduler.restart.fallback`'s business, not an error."""
    for share in allocation.nodes:
        if not graph.has_node(share.node):
            return f"node {share.node} is gone"
        vertex = graph.node(share.node)
        for what, held, has in (("cores", share.cores, vertex.cores),
                                ("GPUs", share.gpus, vertex.gpus),
                                ("memory chunks", share.memory, vertex.memory_chunks)):
            if held and max(held) >= has:
                return (f"node {share.node} has {has} {what} now, and jobid {allocation.jobid} "
                        f"held {len(held)} of them up to number {max(held)}")
    paths = {vertex.path for vertex in graph.virtual}
    for held_vertex in allocation.virtual:
        if held_vertex.path not in paths:
            return f"virtual vertex {held_vertex.path} is no longer in the graph"
    return None


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
        """Records :meth:`restore` could not hold again, and why: their bound pods are held
        from what they request, their unbound ones released
        (:class:`~fluence_core.scheduler.restart.fallback.Fallback`); no pod is deleted."""
        self.untrusted: list[tuple[g.Owner, HeldPlacement, str]] = []
        """Records :meth:`restore` did not hold because their pods do not bear them out, and
        why (:mod:`~fluence_core.scheduler.restart.trust`): handled as :attr:`unrestored` are."""
        self.unreadable: list[tuple[g.Owner, str]] = []
        """Owners whose record annotation could not be read, and why: their bound pods are
        held from what they request (:class:`~fluence_core.scheduler.restart.fallback.Fallback`)."""
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
                alive: Alive, vet: Vet | None = None,
                graph: ResourceGraph | None = None) -> None:
        """Re-hold every recorded placement whose pods still live; drop the rest.

        ``owners`` are ``(resource plural, object)`` pairs that may carry a
        record: the PodGroups and Fluence's own pods.

        **Job ids are reserved before anything new is allocated.** Every record is
        read first; then every allocation restored in two rounds across all records:
        those whose restore allocates nothing (inner matcher ids) first, then the
        shared ones, whose restore leases cores from the inner matcher
        (:func:`~fluence_core.matcher.pooled.restore_order`). So no lease can take an
        id a record holds, whatever order the owners come in. A record that still
        cannot be held gives back only the jobs *it* restored (never an id it merely
        names) and goes to :attr:`unrestored`: its pods are then held from what the
        cluster says (:mod:`~fluence_core.scheduler.restart.fallback`), never deleted.

        **A record is vetted before it is held** (``vet``: its pods must bear it out, see
        :mod:`~fluence_core.scheduler.restart.trust`): one that is not trusted is never restored,
        and goes to :attr:`untrusted`, handled the same way.

        **A record the cluster outgrew** (``graph`` shows a node it names gone, or shrunk
        below the cores, GPUs or memory chunks it names, while the scheduler was down) is
        not an error: it goes to :attr:`unrestored` with a warning that says so, and its
        bound pods are held from what they request on the node as it is now.
        """
        entries: list[_Restoring] = []
        failed: set[g.Owner] = set()
        for owner_resource, obj in owners:
            namespace, name = g.pod_key(obj)
            owner = (owner_resource, namespace, name)
            try:
                records = read_records(owner_resource, obj)
            except ValueError as error:
                logger.warning("cannot read a record: %s; its pods are held from what they "
                               "request", error)
                self.unreadable.append((owner, str(error)))
                self._written.add(owner)
                continue
            if not records:
                continue
            self._written.add(owner)
            self.held[owner] = []
            for record in records:
                if not any(alive(namespace, pod) for pod in record.pods):
                    logger.info("Cancel jobid %s: the pods of %s/%s are gone",
                                record.jobids, namespace, name)
                    continue
                outgrew = _outgrown(record, graph) if graph is not None else None
                if outgrew is not None:
                    logger.warning("the record of %s/%s/%s (jobids %s) cannot be held where it "
                                   "says: %s; its pods are held from what they request",
                                   owner_resource, namespace, name, record.jobids, outgrew)
                    self.unrestored.append((owner, record, outgrew))
                    failed.add(owner)
                    continue
                why = vet(owner, record) if vet is not None else None
                if why is not None:
                    logger.warning("the record of %s/%s/%s (jobids %s) is not trusted: %s",
                                   owner_resource, namespace, name, record.jobids, why)
                    self.untrusted.append((owner, record, why))
                    failed.add(owner)
                    continue
                entries.append(_Restoring(owner, record, len(records)))
        for later in (False, True):
            for entry in entries:
                if entry.error is None:
                    entry.restore(matcher, later)
        changed: dict[g.Owner, int] = {}
        for entry in entries:
            namespace, name = entry.owner[1:]
            if entry.error is not None:
                failed.add(entry.owner)
                logger.error("cannot restore %s/%s jobids %s: %s",
                             namespace, name, entry.record.jobids, entry.error)
                self.unrestored.append((entry.owner, entry.record, entry.error))
                continue
            logger.info("restored jobids %s for %s/%s", entry.record.jobids, namespace, name)
            self.held[entry.owner].append(entry.record)
            changed[entry.owner] = entry.recorded
        for owner, held in self.held.items():
            if owner in failed or (held and changed.get(owner) == len(held)):
                continue  # kept whole, or rewritten once its pods are held again
            self.write(owner)

    def held_members(self, alive: Alive) -> Mapping[g.PodKey, int]:
        """Members each PodGroup already has placed and alive (computed when asked)."""
        return _HeldMembers(self.held, alive)


def _outgrown(record: HeldPlacement, graph: ResourceGraph) -> str | None:
    return next((why for a in record.allocations.values()
                 if (why := outgrown(a, graph)) is not None), None)


@dataclass
class _Restoring:
    """One record being restored: the jobs it holds again so far, or why it cannot."""

    owner: g.Owner
    record: HeldPlacement
    recorded: int
    """How many records its owner carries (a dropped one means the owner is rewritten)."""
    restored: list[int] = field(default_factory=list)
    error: str | None = None

    def restore(self, matcher: Matcher, later: bool) -> None:
        """Restore this round's allocations (``later``: the shared ones); on a failure give
        back exactly what this record restored."""
        for allocation in self.record.allocations.values():
            if restores_later(allocation) != later:
                continue
            try:
                matcher.restore(allocation)
            except FluenceError as error:
                self.error = str(error)
                for jobid in self.restored:
                    matcher.cancel(jobid)
                self.restored = []
                return
            self.restored.append(allocation.jobid)


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
