"""What ``fluence status`` shows: the graph's use, held allocations, pending groups and why.

It rebuilds the scheduler's view from the cluster alone (the durable records on
PodGroups and pods, the pods other schedulers placed), read-only, so it works
from a laptop against any cluster Fluence runs in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fluence_core.scheduler import groups as g
from fluence_core.scheduler.core import Scheduler


@dataclass
class NodeUse:
    name: str
    cores: int
    fluence_cores: int
    other_cores: int
    gpus: int
    used_gpus: int
    down: bool


@dataclass
class HeldGroup:
    owner: str
    pods: list[str]
    jobids: list[int]
    nodes: list[str]
    virtual: list[str]


@dataclass
class PendingInfo:
    group: str
    pods: int
    why: str


@dataclass
class Status:
    nodes: list[NodeUse] = field(default_factory=list)
    virtual: list[tuple[str, str, str]] = field(default_factory=list)
    """(path, type, holder or "free") per top-level virtual resource."""
    held: list[HeldGroup] = field(default_factory=list)
    pending: list[PendingInfo] = field(default_factory=list)


def collect_status(scheduler: Scheduler) -> Status:
    """Summarise a started (read-only) scheduler's view."""
    status = Status()
    pinned = {pin.jobid for pin in scheduler.view.pins.values()}
    cores_by_node: dict[str, list[int]] = {}
    gpus_by_node: dict[str, int] = {}
    for jobid, allocation in scheduler.matcher.allocations().items():
        for share in allocation.nodes:
            entry = cores_by_node.setdefault(share.node, [0, 0])
            entry[1 if jobid in pinned else 0] += len(share.cores)
            gpus_by_node[share.node] = gpus_by_node.get(share.node, 0) + len(share.gpus)
    for node in scheduler.graph.nodes:
        used = cores_by_node.get(node.name, [0, 0])
        status.nodes.append(NodeUse(node.name, node.cores, used[0], used[1], node.gpus,
                                    gpus_by_node.get(node.name, 0), node.down))
    holders: dict[str, str] = {}
    for (resource, namespace, owner), records in scheduler.records.held.items():
        for record in records:
            nodes = sorted({s.node for a in record.allocations.values() for s in a.nodes})
            virtual = [
                f"{v.type}:{v.name}@{v.backend}"
                for a in record.allocations.values()
                for v in a.virtual
            ]
            for a in record.allocations.values():
                for v in a.virtual:
                    holders[v.path] = f"{namespace}/{owner}"
            status.held.append(
                HeldGroup(
                    f"{resource}/{namespace}/{owner}", record.pods, record.jobids, nodes, virtual
                )
            )
    for index in scheduler.graph.virtual_roots:
        vertex = scheduler.graph.virtual[index]
        holder = holders.get(vertex.path) or next(
            (
                f"{who} (part)"
                for path, who in holders.items()
                if path.startswith(vertex.path + "/")
            ),
            "free",
        )
        status.virtual.append((vertex.path, vertex.type, holder))
    for pending in g.pending_groups(scheduler.view.pods.values(), scheduler.view.pod_groups):
        status.pending.append(
            PendingInfo(pending.key, len(pending.pods), pending.waiting or _last_reason(pending))
        )
    return status


def _last_reason(pending: g.PendingGroup) -> str:
    for pod in pending.pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message") or condition.get("reason") or "unschedulable")
    return "not tried yet"
