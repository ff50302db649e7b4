"""Gangs of one workload that share one domain: Kueue's groups of PodSets.

A JobSet's leader Job and its worker Job are two gangs, one PodGroup each. When their
pods name the same ``kueue.x-k8s.io/podset-group-name``, Kueue fits them as one unit:
one domain of their required level holds them all. Fluence does the same:

* the gangs of one group are attempted as one, by the first of them in the queue's order
  (:func:`join`), once each has its pods (:func:`absent_fellows`): their pods are matched
  at once (best fit over their summed needs), then each gang holds its own share, on the
  very nodes the joint match gave its pods; if one cannot, none is placed;
* a gang whose fellows were placed before it (its pods made again) goes only to the
  domain its placed fellows hold (:func:`pinned_domain`);
* every gang of a group must state the same required and preferred levels, and none may
  be cut into slices; otherwise they wait, saying so (:func:`common_constraint`).

The workload is the PodGroup's ``podset-group-workload`` annotation (the webhook's
controller writes ``JobSet/<name>`` there), else its controlling owner, else none: then
the group name is scoped by the namespace alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.kube.api import KubeObject
from fluence_core.kube.meta import annotations_of, metadata_of
from fluence_core.models import Group
from fluence_core.scheduler import groups as g
from fluence_core.stated_topology import read_constraint
from fluence_core.topology import Constraint, level_index

Fellowship = tuple[str, str, str]
"""(namespace, workload, group name): the gangs that share one domain."""


def workload_of(pod_group: KubeObject) -> str:
    """The workload a PodGroup's gang belongs to, for scoping its group of PodSets: the
    annotation the webhook's controller writes, else the controlling (or only) owner
    reference as ``Kind/name``, else "" (the namespace alone)."""
    stamped = annotations_of(pod_group).get(names.PODSET_GROUP_WORKLOAD_ANNOTATION)
    if isinstance(stamped, str) and stamped.strip():
        return stamped.strip()
    refs = [r for r in metadata_of(pod_group).get("ownerReferences") or ()
            if isinstance(r, Mapping)]
    chosen = [r for r in refs if r.get("controller")] or (refs if len(refs) == 1 else [])
    if chosen:
        return f"{chosen[0].get('kind')}/{chosen[0].get('name')}"
    return ""


def fellowship_of(pending: g.PendingGroup) -> Fellowship | None:
    """The group of PodSets a pending gang belongs to, None for none (a lone pod, a gang
    that names no group, or one whose topology cannot be read)."""
    if pending.pod_group is None:
        return None
    key = names.KUEUE_PODSET_GROUP_ANNOTATION
    if key not in annotations_of(pending.pod_group) and not (
            pending.pods and key in annotations_of(pending.pods[0])):
        return None  # members that disagree name none either: the reading is an error
    constraint = read_constraint(pending.pod_group, pending.pods, pending.template)
    if constraint.error or not constraint.podset_group:
        return None
    return (pending.namespace, workload_of(pending.pod_group), constraint.podset_group)


def join(pending: Iterable[g.PendingGroup]) -> list[g.PendingGroup]:
    """The groups to attempt, in order: the gangs of one group of PodSets folded into the
    first of them (its :attr:`~PendingGroup.fellows`), which is attempted for all."""
    leads: dict[Fellowship, g.PendingGroup] = {}
    result: list[g.PendingGroup] = []
    for group in pending:
        fellowship = fellowship_of(group) if group.pod_group is not None else None
        if fellowship is None:
            result.append(group)
            continue
        lead = leads.get(fellowship)
        if lead is None:
            group.fellows = []
            leads[fellowship] = group
            result.append(group)
        else:
            lead.fellows.append(group)
    return result


def describe(fellowship: Fellowship) -> str:
    """How messages name a group of PodSets."""
    namespace, workload, name = fellowship
    return f"group of PodSets {name} of {namespace}/{workload or '(namespace)'}"


def common_constraint(members: Sequence[g.PendingGroup], groups: Sequence[Group]
                      ) -> Constraint | str:
    """The constraint every gang of one group of PodSets states, or why they cannot be
    matched together: two gangs state different required or preferred levels (both are
    named), or one is cut into slices."""
    first = groups[0].topology
    for member, group in zip(members, groups, strict=True):
        topology = group.topology
        if topology.error:
            return topology.error
        if topology.slices:
            return (f"gang {member.key} is cut into slices; a gang in a group of PodSets "
                    "may not be (only the group as a whole is held to one domain)")
        if (set(topology.required), set(topology.preferred), topology.unconstrained) != (
                set(first.required), set(first.preferred), first.unconstrained):
            return (f"the gangs of one group of PodSets must state the same topology: gang "
                    f"{members[0].key} has {_levels(first)}, gang {member.key} has "
                    f"{_levels(topology)}")
    return dataclasses.replace(first, source="; ".join(
        dict.fromkeys(group.topology.source for group in groups if group.topology.source)))


def _levels(constraint: Constraint) -> str:
    parts = [f"required {', '.join(constraint.required)}" if constraint.required else "",
             f"preferred {', '.join(constraint.preferred)}" if constraint.preferred else "",
             "unconstrained" if constraint.unconstrained else ""]
    return "; ".join(p for p in parts if p) or "no level"


def absent_fellows(pending: g.PendingGroup, fellowship: Fellowship,
                   pods: Mapping[g.PodKey, KubeObject],
                   pod_groups: Mapping[g.PodKey, KubeObject]) -> list[str]:
    """The PodGroups of ``pending``'s group of PodSets (named so on the PodGroup itself, as
    the webhook's controller carries it) that have no pod at all yet: their Job has not
    made them. The group waits for them, to be placed whole."""
    namespace = pending.namespace
    present = {m.key.split("/", 1)[1] for m in (pending, *pending.fellows)}
    candidates = [name for (ns, name), pod_group in pod_groups.items()
                  if ns == namespace and name not in present and fellowship_of(g.PendingGroup(
                      f"{ns}/{name}", ns, [], pod_group=pod_group)) == fellowship]
    if not candidates:
        return []
    with_pods = {g.pod_group_name(pod) for key, pod in pods.items() if key[0] == namespace}
    return [f"{namespace}/{name}" for name in sorted(candidates) if name not in with_pods]


def placed_fellow_nodes(pending: g.PendingGroup, fellowship: Fellowship,
                        pods: Mapping[g.PodKey, KubeObject],
                        pod_groups: Mapping[g.PodKey, KubeObject],
                        node_of: Callable[[g.PodKey], str | None]) -> list[str]:
    """The nodes where pods of the other gangs of ``pending``'s group of PodSets run (or
    are being bound), their PodGroups read from ``pod_groups``."""
    namespace = pending.namespace
    own = pending.key.split("/", 1)[1]
    fellows: dict[str, bool] = {}
    found: list[str] = []
    for key, pod in pods.items():
        group_name = g.pod_group_name(pod)
        if key[0] != namespace or group_name is None or group_name == own:
            continue
        node = node_of(key)
        if node is None or g.is_finished(pod):
            continue
        if group_name not in fellows:
            pod_group = pod_groups.get((namespace, group_name))
            fellows[group_name] = pod_group is not None and fellowship_of(g.PendingGroup(
                f"{namespace}/{group_name}", namespace, [pod], pod_group=pod_group)
            ) == fellowship
        if fellows[group_name]:
            found.append(node)
    return found


def pinned_domain(graph: ResourceGraph, constraint: Constraint,
                  placed: Sequence[str]) -> frozenset[str] | None:
    """The nodes a gang may use whose fellows run on ``placed``: those of the domain of its
    narrowest required level (else preferred) that holds the first of them. None when it
    is held to no configured level, or the node is gone from the graph."""
    levels = graph.levels
    known = [i for i in (level_index(levels, key) for key in constraint.required)
             if i is not None]
    if not known:
        known = [i for i in (level_index(levels, key) for key in constraint.preferred)
                 if i is not None]
    if not known or not placed:
        return None
    level = max(known)
    try:
        domain = graph.node(placed[0]).domain(level)
    except KeyError:
        return None
    return frozenset(node.name for node in graph.nodes if node.domain(level) == domain)


def pinned(group: Group, nodes: Mapping[str, str | None] | frozenset[str]) -> Group:
    """``group`` with each pod's allowed nodes narrowed: to the one node ``nodes`` gives
    its key (a mapping), or to the set ``nodes`` (a domain)."""
    pods = []
    for pod in group.pods:
        if isinstance(nodes, frozenset):
            keep = nodes
        else:
            node = nodes.get(pod.key)
            if node is None:
                pods.append(pod)
                continue
            keep = frozenset((node,))
        allowed = keep if pod.allowed is None else pod.allowed & keep
        pods.append(dataclasses.replace(pod, allowed=allowed, preferred=tuple(
            tier & allowed for tier in pod.preferred if tier & allowed)))
    return dataclasses.replace(group, pods=tuple(pods))


def on_their_nodes(shares: Sequence[Group], nodes: Mapping[str, str | None]) -> list[Group]:
    """Each gang's share of a joint match held to the nodes ``nodes`` gave its pods: to the
    set of them when no two gangs' sets meet (one jobspec per gang, as any gang), else each
    pod to its own node (so a gang cannot take room the joint match gave another)."""
    sets = [frozenset(n for p in share.pods if (n := nodes.get(p.key)) is not None)
            for share in shares]
    disjoint = sum(len(s) for s in sets) == len(frozenset().union(*sets))
    return [pinned(share, held) if disjoint else pinned(share, nodes)
            for share, held in zip(shares, sets, strict=True)]
