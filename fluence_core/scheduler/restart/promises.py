"""A restored record is a promise: its unbound members go where it says, or the gang is released.

A scheduler that dies while binding a gang leaves a record naming every member
and some members bound. A restart restores the record (its allocations are
held again), and then, before anything new is placed, :class:`PromiseKeeper`:

* binds each unbound member within what the record holds on its nodes, minus
  what the members already bound there take, and only on a node Kubernetes' filters
  let that member use (the cycle's own :class:`~fluence_core.scheduler.feasible.FeasibleNodes`:
  a record never binds a pod against its nodeSelector, affinity or taints);
* or, when that cannot be (a recorded node is gone or cordoned, pods placed
  there meanwhile by someone else take the room, the record does not cover
  the members), gives the record back and hands its members to
  :class:`~fluence_core.scheduler.restart.fallback.Fallback`: the members already bound
  keep running and are held from what they request; only the unbound members
  are released, to be placed again. A bound pod is never deleted here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fluence_core.kube.api import KubeObject
from fluence_core.errors import FluenceError
from fluence_core.matcher.jobspec import is_compute
from fluence_core.log import logger
from fluence_core.matcher.group import GroupMatch
from fluence_core.matcher.pooled import is_shared_allocation
from fluence_core.models import Group, PodRequest
from fluence_core.matcher.readback import PodPlacement, assign_pods
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.binder import Binder, Commit, CycleResult
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.scheduler.restart.fallback import Fallback
from fluence_core.scheduler.feasible import FeasibleNodes
from fluence_core.scheduler.records import HeldPlacement, RecordBook
from fluence_core.scheduler.view import ClusterView

_Members = list[tuple[g.PodKey, KubeObject]]


class PromiseKeeper:
    """Binds the unbound members of restored records where the records say."""

    def __init__(self, view: ClusterView, records: RecordBook, binder: Binder,
                 fallback: Fallback, feasible: FeasibleNodes) -> None:
        self.view = view
        self.records = records
        self.binder = binder
        self.fallback = fallback
        self.feasible = feasible
        """The cycle's filters: which nodes each unbound member may use."""

    def keep(self, ctx: SchedulingContext) -> list[CycleResult]:
        """Bind or release every record with unbound members (the caller holds the lock)."""
        results: list[CycleResult] = []
        on_node = self._bound_by_node()
        released = False
        for owner, held in list(self.records.held.items()):
            for record in list(held):
                live = self._live_members(owner, record)
                unbound = [(k, p) for k, p in live if not g.is_bound(p)
                           and not g.is_terminating(p)]
                if not unbound:
                    continue
                placements = self._plan(record, live, unbound, on_node)
                if isinstance(placements, str):
                    self.release(owner, record, placements)
                    released = True
                    continue
                results.append(self._bind(owner, record, unbound, placements, ctx))
        if released:
            self.view.pin_foreign_pods()  # pods that found no room beside a released record
        return results

    # -- planning --------------------------------------------------------------------------

    def _live_members(self, owner: g.Owner, record: HeldPlacement) -> _Members:
        namespace = owner[1]
        members = ((namespace, name) for name in record.pods)
        return [(key, pod) for key in members
                if (pod := self.view.pods.get(key)) is not None and not g.is_finished(pod)]

    def _bound_by_node(self) -> dict[str, _Members]:
        by_node: dict[str, _Members] = {}
        for key, pod in self.view.pods.items():
            if g.is_bound(pod) and not g.is_finished(pod):
                by_node.setdefault(pod["spec"]["nodeName"], []).append((key, pod))
        return by_node

    def _plan(self, record: HeldPlacement, live: _Members, unbound: _Members,
              on_node: Mapping[str, _Members]) -> dict[str, str] | str:
        """Pod key -> node for the unbound members, or why the record cannot be kept.

        Whole-core members go within the record's cores, GPUs and memory on each node;
        shared members within its millicores and memory from each node's pool (a shared
        allocation says where its pods' millicores are, and nowhere else may they run).
        """
        graph = self.view.graph
        whole: dict[str, list[int]] = {}
        pool: dict[str, list[int]] = {}
        for kind, allocation in record.allocations.items():
            if not is_compute(kind):
                continue
            shared = is_shared_allocation(allocation)
            for share in allocation.nodes:
                if not graph.has_node(share.node):
                    return f"recorded node {share.node} is gone"
                vertex = graph.node(share.node)
                if vertex.down or not vertex.schedulable:
                    return f"recorded node {share.node} is cordoned or tainted"
                entry = (pool if shared else whole).setdefault(share.node, [0, 0, 0])
                entry[0] += share.millicores if shared else len(share.cores)
                entry[1] += len(share.gpus)
                entry[2] += share.memory_mib
        for node in {**whole, **pool}:
            intruders = [f"{k[0]}/{k[1]}" for k, pod in on_node.get(node, ())
                         if k not in self.view.pins and not self.records.covers(k, pod)]
            if intruders:
                return f"pods placed on {node} meanwhile take its room: {', '.join(intruders)}"
        for key, pod in live:
            if not g.is_bound(pod):
                continue
            node = pod["spec"]["nodeName"]
            request = PodRequest.from_kube(pod)
            room = pool if request.shared else whole
            request = _as_room(request)
            if node not in room:
                return f"member {key[0]}/{key[1]} runs on {node}, outside its record"
            entry = room[node]
            entry[0] -= request.cores
            entry[1] -= request.gpus
            entry[2] -= request.memory_mib
        requests = self._allowed(unbound)
        if isinstance(requests, str):
            return requests
        nodes: dict[str, str] = {}
        try:
            for room, part in ((whole, [r for r in requests if not r.shared]),
                               (pool, [_as_room(r) for r in requests if r.shared])):
                if part:
                    nodes.update(assign_pods(part, {n: (c, gp, m) for n, (c, gp, m)
                                                    in room.items()}))
        except FluenceError as error:
            return f"the record no longer covers its unbound members ({error})"
        return nodes

    def _allowed(self, unbound: _Members) -> list[PodRequest] | str:
        """The unbound members' requests with the nodes each may use, or why one may use
        none."""
        pods = [pod for _, pod in unbound]
        group = Group("record", tuple(PodRequest.from_kube(pod) for pod in pods),
                      unbound[0][0][0])
        self.feasible.begin()
        constrained = self.feasible.constrain(group, pods)
        if isinstance(constrained, str):
            return f"a member not yet bound may use none of the cluster's nodes ({constrained})"
        return list(constrained.pods)

    # -- acting ----------------------------------------------------------------------------

    def _bind(self, owner: g.Owner, record: HeldPlacement, unbound: _Members,
              nodes: Mapping[str, str], ctx: SchedulingContext) -> CycleResult:
        namespace = owner[1]
        pod_group = self.view.pod_groups.get((namespace, owner[2])) \
            if owner[0] == "podgroups" else None
        key = f"{namespace}/{owner[2]}"
        pending = g.PendingGroup(key, namespace, [pod for _, pod in unbound],
                                 min_count=len(unbound), pod_group=pod_group)
        group = pending.requests()
        placements = {pod.key: PodPlacement(pod.key, nodes[pod.key]) for pod in group.pods}
        logger.info("keeping the record of %s: binding %s", key,
                    ", ".join(f"{p}->{n}" for p, n in nodes.items()))
        match = GroupMatch(group, dict(record.allocations), placements)
        # in this thread, before the first cycle: a pool would race the cycle for the lock
        return self.binder.bind_now(Commit(pending, group, match, owner, record, {}, ctx))

    def release(self, owner: g.Owner, record: HeldPlacement, why: str) -> None:
        """Give back a record whose promise cannot be kept: its bound members keep running,
        held from what they request, and its unbound members are released."""
        logger.warning("cannot keep the record of %s/%s (jobids %s): %s; its bound members "
                       "stay where they run, its unbound members are released",
                       owner[1], owner[2], record.jobids, why)
        self.view.cancel(record, why)
        held = self.records.held.get(owner, [])
        if record in held:
            held.remove(record)
        self.fallback.rehold(owner, record.pods, f"its record cannot be kept: {why}")


def _as_room(request: PodRequest) -> PodRequest:
    """A shared pod as :func:`assign_pods` counts the pool: its millicores in place of cores."""
    if not request.shared:
        return request
    return dataclasses.replace(request, cores=request.millicores or 0)
