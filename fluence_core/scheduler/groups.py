"""Pending pods grouped the way they must be placed, and in what order.

A pod with ``spec.schedulingGroup.podGroupName`` belongs to that PodGroup: a
``gang`` policy places at least ``minCount`` members together, ``basic`` places
each pod alone. A pod without one is a group of one. Gated pods
(``spec.schedulingGates``) are never placed and do not count toward
``minCount``. Groups are ordered by priority (highest first), then age.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from fluence_core import names
from fluence_core.kube.api import KubeObject
from fluence_core.kube.meta import metadata_of
from fluence_core.models import Group, PodRequest
from fluence_core.stated_topology import read_constraint, template_ref, workload_template

PodKey = tuple[str, str]
"""(namespace, name)"""

Owner = tuple[str, str, str]
"""Where a durable record lives: (``podgroups`` or ``pods``, namespace, name)."""


def pod_key(pod: KubeObject) -> PodKey:
    metadata = metadata_of(pod)
    return (metadata.get("namespace") or "default", metadata.get("name") or "")


def is_ours(pod: KubeObject) -> bool:
    return (pod.get("spec") or {}).get("schedulerName") == names.SCHEDULER_NAME


def is_bound(pod: KubeObject) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def is_finished(pod: KubeObject) -> bool:
    """Succeeded or Failed: holds nothing any more.

    A pod being deleted (``deletionTimestamp``) still runs until its kubelet
    confirms, so it keeps its resources until the DELETED event, as
    kube-scheduler counts it.
    """
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(pod: KubeObject) -> bool:
    """Being deleted: never to be placed, still holding where it runs."""
    return bool(metadata_of(pod).get("deletionTimestamp"))


def is_gated(pod: KubeObject) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def pod_group_name(pod: KubeObject) -> str | None:
    group = (pod.get("spec") or {}).get("schedulingGroup") or {}
    name = group.get("podGroupName")
    return str(name) if name else None


def priority(pod: KubeObject) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def created(pod: KubeObject) -> str:
    return str(metadata_of(pod).get("creationTimestamp") or "")


@dataclass
class PendingGroup:
    """A group with pods waiting to be placed, or the reason it cannot be tried yet."""

    key: str
    namespace: str
    pods: list[KubeObject]
    min_count: int = 1
    pod_group: KubeObject | None = None
    waiting: str | None = None
    gated: int = 0
    priority: int = 0
    created: str = ""
    template: KubeObject | None = None
    """The Workload's ``podGroupTemplates[]`` entry its PodGroup was made from, if seen."""
    fellows: list[PendingGroup] = field(default_factory=list)
    """The other gangs of its group of PodSets, attempted with it
    (:mod:`~fluence_core.scheduler.podset_groups`)."""

    @property
    def ready(self) -> bool:
        return self.waiting is None

    def requests(self) -> Group:
        """The matcher's view of the pods to place now."""
        return Group(self.key, tuple(PodRequest.from_kube(p) for p in self.pods), self.namespace,
                     read_constraint(self.pod_group, self.pods, self.template))


@dataclass
class GroupPolicy:
    gang: bool
    min_count: int


def policy_of(pod_group: KubeObject) -> GroupPolicy:
    """The PodGroup's scheduling policy: ``gang`` with its minCount, or ``basic``."""
    policy = ((pod_group.get("spec") or {}).get("schedulingPolicy")) or {}
    gang = policy.get("gang")
    if gang is not None:
        return GroupPolicy(True, max(1, int(gang.get("minCount") or 1)))
    return GroupPolicy(False, 1)


def pending_groups(
    pods: Iterable[KubeObject],
    pod_groups: Mapping[PodKey, KubeObject],
    held_members: Mapping[PodKey, int] | None = None,
    workloads: Mapping[PodKey, KubeObject] | None = None,
) -> list[PendingGroup]:
    """Group the pending Fluence pods and order them (priority desc, then age).

    ``held_members`` counts, per PodGroup, members already placed: a gang whose
    minCount was met by an earlier placement lets late members in one by one.
    ``workloads`` are the Workloads seen: a PodGroup made from one of their templates
    (``spec.podGroupTemplateRef``) gets that template, whose constraint counts.
    """
    if held_members is None:  # not `or`: that asks the mapping its length, a walk of every record
        held_members = {}
    gangs: dict[PodKey, list[KubeObject]] = {}
    gated: dict[PodKey, int] = {}
    singles: list[PendingGroup] = []
    for pod in pods:
        if not is_ours(pod) or is_bound(pod) or is_finished(pod) or is_terminating(pod):
            continue
        namespace, name = pod_key(pod)
        group_name = pod_group_name(pod)
        if group_name is None:
            if not is_gated(pod):
                singles.append(_single(pod, namespace, name))
            continue
        key = (namespace, group_name)
        if is_gated(pod):
            gated[key] = gated.get(key, 0) + 1
            continue
        gangs.setdefault(key, []).append(pod)
    result = list(singles)
    for key, members in gangs.items():
        namespace, group_name = key
        pod_group = pod_groups.get(key)
        if pod_group is None:
            result.append(
                PendingGroup(
                    f"{namespace}/{group_name}",
                    namespace,
                    members,
                    waiting=f"PodGroup {namespace}/{group_name} does not exist yet",
                    priority=max(priority(p) for p in members),
                    created=min(created(p) for p in members),
                )
            )
            continue
        policy = policy_of(pod_group)
        if not policy.gang:
            result.extend(_single(p, namespace, pod_key(p)[1]) for p in members)
            continue
        still_needed = max(1, policy.min_count - held_members.get(key, 0))
        group = PendingGroup(
            f"{namespace}/{group_name}", namespace, sorted(members, key=lambda p: pod_key(p)[1]),
            min_count=still_needed, pod_group=pod_group, gated=gated.get(key, 0),
            priority=max(priority(p) for p in members), created=min(created(p) for p in members),
            template=template_of(pod_group, workloads or {}),
        )
        if len(members) < still_needed:
            group.waiting = (
                f"gang {group.key} has {len(members)} of {still_needed} members ready"
                + (f" ({group.gated} gated)" if group.gated else "")
            )
        result.append(group)
    result.sort(key=lambda g: (-g.priority, g.created, g.key))
    return result


def template_of(pod_group: KubeObject, workloads: Mapping[PodKey, KubeObject]
                ) -> KubeObject | None:
    """The Workload template a PodGroup names, when that Workload is among ``workloads``."""
    ref = template_ref(pod_group)
    if ref is None:
        return None
    namespace = metadata_of(pod_group).get("namespace") or "default"
    found = workload_template(workloads.get((namespace, ref[0])), ref[1])
    return dict(found) if found is not None else None


def owners_of(key: PodKey, pod: KubeObject) -> list[Owner]:
    """Where a record holding this pod can live: its PodGroup, or the pod itself."""
    namespace, name = key
    owners: list[Owner] = [("pods", namespace, name)]
    group = pod_group_name(pod)
    if group:
        owners.append(("podgroups", namespace, group))
    return owners


def record_owner(pending: PendingGroup) -> Owner:
    """Where a group's durable record lives: its PodGroup, or the lone pod."""
    if pending.pod_group is not None:
        return ("podgroups", pending.namespace, pending.key.split("/", 1)[1])
    return ("pods", pending.namespace, pod_key(pending.pods[0])[1])


def alive(pods: Mapping[PodKey, KubeObject], namespace: str, pod: str) -> bool:
    """Whether ``pods`` (a cache) has this pod, not finished."""
    obj = pods.get((namespace, pod))
    return obj is not None and not is_finished(obj)


def _single(pod: KubeObject, namespace: str, name: str) -> PendingGroup:
    return PendingGroup(
        f"{namespace}/{name}", namespace, [pod], priority=priority(pod), created=created(pod)
    )
