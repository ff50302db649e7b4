"""Killing the scheduler at any write, and the invariants a restart must restore.

:class:`Faulty` wraps a cluster and raises :class:`Killed` just before its n-th
write (patch, status patch, bind, event, create, delete): the scheduler stops
there, as a SIGKILL would stop it, with no rollback (``Killed`` is not an
``Exception``, so no handler of the scheduler catches it). The cluster keeps
whatever was written before.

:func:`check_invariants` reads the cluster (and the restarted scheduler) and
asserts what issue 15 asks: no capacity held by nobody, no member outside its
record, no node oversubscribed, every gang whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fluence_core import names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.models import NodeInfo, PodRequest
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.core import Scheduler

WRITES = ("patch", "patch_status", "bind", "post_event", "create", "delete", "replace")


class Killed(BaseException):
    """The scheduler process died here."""


class Faulty:
    """A cluster that dies before write number ``kill_at`` (1-based; 0: never), and names
    every write it saw."""

    def __init__(self, inner: Any, kill_at: int = 0) -> None:
        self._inner = inner
        self.kill_at = kill_at
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in WRITES:
            return attr

        def write(*args: Any, **kwargs: Any) -> Any:
            step = describe(name, args)
            if self.kill_at and len(self.writes) + 1 == self.kill_at:
                raise Killed(step)
            self.writes.append(step)
            return attr(*args, **kwargs)

        return write


def describe(method: str, args: tuple[Any, ...]) -> str:
    """A write as a step name: ``bind default/g1-0``, ``patch podgroups/g1``, ..."""
    if method == "bind":
        return f"bind {args[0]}/{args[1]}"
    if method == "post_event":
        meta = args[0].get("metadata") or {}
        return f"event {args[2]} {meta.get('name')}"
    resource = getattr(args[0], "plural", args[0])
    name = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
    return f"{method} {resource}/{name}"


def _cpu(pod: Mapping[str, Any]) -> int:
    return PodRequest.from_kube(pod).cores


def check_invariants(cluster: Any, scheduler: Scheduler, namespace: str | None = None,
                     node_prefix: str = "") -> None:
    """Assert the four invariants over the cluster's objects and the scheduler's holdings
    (only ``namespace``'s pods and PodGroups, and nodes named with ``node_prefix``, on a
    shared API server)."""
    pods = [p for p in cluster.list(PODS, namespace).items if not g.is_finished(p)]
    nodes = {n["metadata"]["name"]: NodeInfo.from_kube(n) for n in cluster.list(NODES).items
             if n["metadata"]["name"].startswith(node_prefix)}
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        group = g.pod_group_name(pod)
        if group:
            by_group.setdefault((pod["metadata"]["namespace"], group), []).append(pod)

    # no node oversubscribed
    used: dict[str, int] = {}
    for pod in pods:
        if g.is_bound(pod):
            node = pod["spec"]["nodeName"]
            used[node] = used.get(node, 0) + _cpu(pod)
    for node, cores in used.items():
        assert cores <= nodes[node].cores, f"{node} oversubscribed: {cores} > {nodes[node].cores}"

    # every gang whole, and no member outside its record
    for pod_group in cluster.list(PODGROUPS, namespace).items:
        key = g.pod_key(pod_group)
        members = by_group.get(key, [])
        bound = [p for p in members if g.is_bound(p)]
        policy = g.policy_of(pod_group)
        if policy.gang and bound:
            assert len(bound) >= policy.min_count and len(bound) == len(members), (
                f"gang {key} split: {len(bound)} of {len(members)} bound "
                f"(minCount {policy.min_count})"
            )
        raw = (pod_group["metadata"].get("annotations") or {}).get(names.ALLOCATION_ANNOTATION)
        records = json.loads(raw) if raw else []
        room: dict[str, int] = {}
        recorded: set[str] = set()
        for record in records:
            recorded.update(record["pods"])
            for allocation in record["allocations"].values():
                for share in allocation.get("nodes", ()):
                    room[share["node"]] = room.get(share["node"], 0) + len(share["cores"])
        taken: dict[str, int] = {}
        for pod in bound:
            name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
            assert name in recorded, f"{key}: {name} is bound on {node} but in no record"
            assert node in room, f"{key}: {name} on {node}, outside its record {sorted(room)}"
            taken[node] = taken.get(node, 0) + _cpu(pod)
        for node, cores in taken.items():
            assert cores <= room[node], f"{key}: members take {cores} cores on {node}, " \
                                        f"the record holds {room[node]}"
        if bound and len(bound) == len(members):
            idle = sorted(set(room) - set(taken))
            assert not idle, f"{key}: the record holds {idle} where no member runs"

    # no capacity held by nobody: what the matcher holds on each node is what runs there
    held: dict[str, int] = {}
    with scheduler.view.lock:
        allocations = list(scheduler.matcher.allocations().values())
        for allocation in allocations:
            for share in allocation.nodes:
                if share.node in nodes:
                    held[share.node] = held.get(share.node, 0) + len(share.cores)
        unbound_held = {
            name for owner, records in scheduler.records.held.items() for r in records
            for name in r.pods
            if namespace in (None, owner[1])
            and (p := scheduler.view.pods.get((owner[1], name))) is not None and not g.is_bound(p)
        }
    assert not unbound_held, f"records hold pods that are not bound: {sorted(unbound_held)}"
    for node in set(held) | set(used):
        assert held.get(node, 0) == used.get(node, 0), (
            f"{node}: the matcher holds {held.get(node, 0)} cores, pods running there "
            f"request {used.get(node, 0)}"
        )


def quiesce(scheduler: Scheduler, rounds: int = 20) -> None:
    """Pump and schedule until nothing changes."""
    for _ in range(rounds):
        scheduler.pump()
        results = scheduler.schedule_once()
        if not scheduler.pump() and not any(r.placed for r in results):
            return

