"""A durable record is held again only when the pods it names bear it out.

A record is an annotation, and an annotation can be written by whoever may edit the
object: the admission policy (``deploy/admission-policy.yaml``) refuses such edits, but a
cluster may run without it, or have objects older than it. Why it matters: a tenant who
wrote ``allocation`` on their own pending pod, listing every core of two free nodes, had
a restarted scheduler withhold both nodes from everyone and bind the pod against its
nodeSelector. So before :meth:`~fluence_core.scheduler.records.RecordBook.restore` holds
a record, :func:`distrust` checks it against the pods themselves: whose pods it names,
that a lone pod's is bound, where its members run or may run, and that it asks no more
than they request.

What fails is not held: its bound pods are held from what they request and its pods not
yet bound are released (:mod:`~fluence_core.scheduler.restart.fallback`), with a warning and an
Event naming what was wrong. A bound pod is never deleted, moved or evicted for it. The
filters that depend on other pods (inter-pod affinity, spread) are asked when the
record's unbound members are bound (:mod:`~fluence_core.scheduler.restart.promises`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fluence_core import names
from fluence_core.feasibility import NodeFacts, PodFacts
from fluence_core.feasibility.node_affinity import required_match
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import is_compute
from fluence_core.matcher.pooled import is_shared_allocation
from fluence_core.kube.api import KubeObject
from fluence_core.models import PodRequest
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.records import HeldPlacement


@dataclass
class _Size:
    """What a record holds, or what its pods may hold, summed over its nodes."""

    cores: int = 0
    gpus: int = 0
    millicores: int = 0
    memory_mib: int = 0

    def excess(self, asked: _Size) -> str | None:
        """The first part of this size beyond ``asked``, in words."""
        for part, unit in (("cores", "cores"), ("gpus", "GPUs"), ("millicores", "millicores"),
                           ("memory_mib", "MiB of memory")):
            held, allowed = getattr(self, part), getattr(asked, part)
            if held > allowed:
                return f"it holds {held} {unit}, its pods request {allowed}"
        return None


def distrust(owner: g.Owner, record: HeldPlacement, pods: Mapping[g.PodKey, KubeObject],
             nodes: Mapping[str, KubeObject], graph: ResourceGraph) -> str | None:
    """Why ``record`` of ``owner`` cannot be trusted, or None when its pods bear it out.

    ``pods`` and ``nodes`` are the cluster as listed, ``graph`` the one it is restored in.
    A record is trusted only when all of these hold:

    * **whose pods**: a pod's own record names that pod alone; a PodGroup's names only pods
      of that PodGroup;
    * **a lone pod's record needs its pod bound**: a pending pod's record may have been
      written by anyone and is never trusted (the pod is placed as new);
    * **where**: a bound member runs on a node the record names, and every node it names
      either runs a member or (a gang's record with members not yet bound) is one that a
      member not yet bound may use by its nodeSelector and required node affinity
      (:func:`~fluence_core.feasibility.node_affinity.required_match`, the NodeAffinity
      filter's own rule);
    * **how much**: no more than its live pods request
      (:meth:`~fluence_core.models.PodRequest.from_kube`): exclusive cores, GPUs,
      millicores from the pool, memory (a pod holding whole chunks may round up by less
      than one chunk of the largest chunk the record names), and virtual resources: no
      more of them than its pods request, each a vertex that serves a type a pod
      requests, with that pod's ``require-*`` pins.

    Not checked here: which vertex of a node or of a virtual type the record names (a
    restore refuses one that is held already). Known limits: memory is counted in the
    node's chunks as they are now, so a node whose memory grew while Fluence was down can
    make an honest record look too big (its pods are then held from what they request:
    the accounting stays right, the warning is wrong). A record naming a pod that is gone
    is held for the pods left, so a gang that lost a member while Fluence was down is held
    from its pods' requests. A PodGroup's record is still a promise for its members not
    yet bound (a crash mid-bind must not scatter a gang), kept only within their filters;
    a lone pod's is not.
    """
    resource, namespace, name = owner
    members: list[tuple[str, KubeObject]] = []
    for pod_name in record.pods:
        pod = pods.get((namespace, pod_name))
        if pod is None:
            continue  # gone: it asks for nothing, and the record is held for the rest
        if resource == "pods" and pod_name != name:
            return f"it names pod {namespace}/{pod_name}, not only its own pod"
        if resource == "podgroups" and g.pod_group_name(pod) != name:
            return f"it names pod {namespace}/{pod_name}, which is not of PodGroup {name}"
        members.append((pod_name, pod))
    if resource == "pods" and members and not g.is_bound(members[0][1]):
        return (f"pod {namespace}/{name} is not bound, and the record of a pod not yet bound "
                "may have been written by anyone")
    try:
        requests = [(member, pod, PodRequest.from_kube(pod)) for member, pod in members]
    except ValueError as error:
        return f"its pods' requests cannot be read: {error}"
    return _where(record, requests, nodes) or _how_much(record, requests, graph)


def _record_nodes(record: HeldPlacement) -> set[str]:
    return {share.node for kind, allocation in record.allocations.items() if is_compute(kind)
            for share in allocation.nodes}


def _where(record: HeldPlacement, members: list[tuple[str, KubeObject, PodRequest]],
           nodes: Mapping[str, KubeObject]) -> str | None:
    named = _record_nodes(record)
    used: set[str] = set()
    waiting: list[KubeObject] = []
    for member, pod, _ in members:
        if g.is_finished(pod):
            continue
        if not g.is_bound(pod):
            waiting.append(pod)
            continue
        node = str(pod["spec"]["nodeName"])
        if node not in named:
            listed = ", ".join(sorted(named)) or "none"
            if len(members) == 1:
                return f"it names node {listed}, the pod is bound to {node}"
            return f"member {member} is bound to {node}, which it does not name ({listed})"
        used.add(node)
    for node in sorted(named - used):
        if not any(_may_use(pod, nodes.get(node)) for pod in waiting):
            return f"it names node {node}, where no member of it runs or may run"
    return None


def _may_use(pod: KubeObject, node: KubeObject | None) -> bool:
    """Whether ``pod``'s nodeSelector and required node affinity allow ``node``."""
    if node is None:
        return False
    try:
        return required_match(PodFacts.from_kube(pod), NodeFacts.from_kube(node))
    except (ValueError, TypeError, AttributeError, KeyError):
        return False  # a garbled object: nothing it allows can be known


def _how_much(record: HeldPlacement, members: list[tuple[str, KubeObject, PodRequest]],
              graph: ResourceGraph) -> str | None:
    held = _Size()
    largest_chunk = 0
    virtual = 0
    serves = {vertex.path: vertex.properties for vertex in graph.virtual}
    for kind, allocation in record.allocations.items():
        for share in allocation.nodes if is_compute(kind) else ():
            chunk = graph.node(share.node).chunk_mib if graph.has_node(share.node) else 0
            largest_chunk = max(largest_chunk, chunk)
            held.cores += len(share.cores)
            held.gpus += len(share.gpus)
            if is_shared_allocation(allocation):
                held.millicores += share.millicores
                held.memory_mib += share.memory_mib
            else:
                held.memory_mib += max(len(share.memory) * chunk, share.memory_mib)
        for vertex in allocation.virtual:
            virtual += 1
            properties = serves.get(vertex.path, frozenset())
            if not any(_serves(properties, vtype, request) for _, _, request in members
                       for vtype in request.virtual):
                return (f"it holds {vertex.type} {vertex.path}, which serves no virtual "
                        "resource its pods request (type and require-* pins)")
    asked = _Size()
    wanted = 0
    for _, _, request in members:
        if request.shared:
            asked.millicores += request.millicores or 0
            asked.memory_mib += request.memory_mib
        else:
            asked.cores += request.cores
            asked.gpus += request.gpus
            asked.memory_mib += request.memory_mib + (largest_chunk if request.memory_mib
                                                      else 0)
        wanted += sum(request.virtual.values())
    excess = held.excess(asked)
    if excess:
        return excess
    if virtual > wanted:
        return f"it holds {virtual} virtual resources, its pods request {wanted}"
    return None


def _serves(properties: frozenset[str], vtype: str, request: PodRequest) -> bool:
    """Whether a virtual vertex with ``properties`` is one the matcher could have given
    ``request`` for ``vtype``: it serves that type (its own or a descendant's, as
    :func:`~fluence_core.matcher.jobspec.virtual_jobspec` asks) with the pod's pins."""
    needed = {names.class_property(vtype)}
    needed.update(names.attribute_property(k, v) for k, v in request.requires.items())
    return needed <= properties
