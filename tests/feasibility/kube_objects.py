"""Small builders of Kubernetes dicts for the feasibility tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fluence_core.feasibility import NodeFacts, PodFacts, Snapshot
from fluence_core.testing import make_node_dict, make_pod_dict


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    cpu: str = "8",
    memory: str = "16Gi",
    pods: str = "110",
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node labelled with its hostname, as the kubelet registers it."""
    return make_node_dict(name, cpu, memory, pods=pods, allocatable=extra, taints=taints,
                          unschedulable=unschedulable, hostname=True, labels=labels)


def pod(name: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
        node_name: str = "", cpu: str | None = None, memory: str | None = None,
        requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod requesting what is given (nothing by default), bound when ``node_name`` is."""
    return make_pod_dict(name, cpu, memory, extra=requests, namespace=namespace,
                         labels=labels or {}, node_name=node_name or None, **spec)


def facts(obj: dict[str, Any]) -> PodFacts:
    return PodFacts.from_kube(obj)


def node_facts(obj: dict[str, Any]) -> NodeFacts:
    return NodeFacts.from_kube(obj)


def snapshot(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]] = (),
             **storage: Any) -> Snapshot:
    return Snapshot.from_kube(nodes, pods, **storage)


def term(selector: dict[str, Any] | None, key: str, **extra: Any) -> dict[str, Any]:
    """A required (anti-)affinity term."""
    body: dict[str, Any] = {"topologyKey": key, **extra}
    if selector is not None:
        body["labelSelector"] = selector
    return body


def affinity(*, pod_affinity: Sequence[dict[str, Any]] = (),
             anti: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if pod_affinity:
        found["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(pod_affinity)
        }
    if anti:
        found["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return found


def refusals(
    feasibility_filter: Any, pod_obj: dict[str, Any], snap: Snapshot
) -> dict[str, tuple[str, ...]]:
    """Every node's reasons under one filter alone (empty tuple: the node is fine)."""
    from fluence_core.feasibility import feasible

    result = feasible(facts(pod_obj), snap, [feasibility_filter])
    if result.refusal is not None:
        return {n.name: (result.refusal,) for n in snap.nodes}
    return {n.name: result.refused.get(n.name, ()) for n in snap.nodes}
