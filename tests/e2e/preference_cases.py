"""Generated cases where a soft preference decides kube-scheduler's node.

Every case has nodes of equal capacity and one pod with a preference whose
weight dominates what kube-scheduler's resource scores can add (at most 100 each
for LeastAllocated and BalancedAllocation, against 200 or 300 for a full
preference). Its ``preferred`` nodes are the class kube-scheduler must choose
from, worked out here from the case's own construction, not from Fluence's
scoring code. The same seed gives the same cases.

Kinds (``Case.kind``):

* ``node-affinity``: a preferred term of weight 100 on a label some nodes carry;
* ``node-affinity-tiers``: weight 80 on a label of a node without room, weight 20
  on another label: the best node that fits is in the second tier;
* ``taint``: ``PreferNoSchedule`` taints on every node but some;
* ``spread``: ``ScheduleAnyway`` over hostnames, matching pods on every node but some;
* ``pod-affinity``: a preferred term toward a pod on one node;
* ``pod-anti-affinity``: a preferred term away from pods on every node but some;
* ``weights``: preferred node affinity (weight 2 in the profile) toward nodes that
  also carry a ``PreferNoSchedule`` taint (weight 3): kube-scheduler's weights make
  the untainted nodes win, 300 to 200.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from fluence_core.testing import make_node_dict, make_pod_dict

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
KINDS = ("node-affinity", "node-affinity-tiers", "taint", "spread", "pod-affinity",
         "pod-anti-affinity", "weights")
SOFT = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}


@dataclass
class Case:
    index: int
    kind: str
    nodes: list[dict[str, Any]]
    existing: list[dict[str, Any]]
    pod: dict[str, Any]
    preferred: set[str]


def _node(name: str, zone: str, labels: dict[str, str] | None = None,
          taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A 4-core node in ``zone``; every node of a case has the same capacity."""
    return make_node_dict(name, "4", hostname=True, zone=zone, labels=labels, taints=taints,
                          capacity=True)


def _pod(name: str, cpu: str, labels: dict[str, str] | None = None, node: str = "",
         **spec: Any) -> dict[str, Any]:
    """A pod of kube-scheduler's (the test names the scheduler that places it), bound to
    ``node`` when given."""
    return make_pod_dict(name, cpu, "64Mi", namespace=None, labels=labels or {},
                         scheduler="default-scheduler", node_name=node,
                         terminationGracePeriodSeconds=0, **spec)


def _weighted(weight: int, app: str) -> list[dict[str, Any]]:
    return [{"weight": weight, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}}]


def _prefer(*terms: tuple[int, str]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [
            {"key": key, "operator": "Exists"}]}} for w, key in terms]}}


def generate(count: int, seed: int = 7) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        names = [f"p{index}-n{i}" for i in range(rng.randint(3, 4))]
        chosen = set(rng.sample(names, rng.randint(1, len(names) - 1)))
        others = [n for n in names if n not in chosen]
        zones = {n: rng.choice("ab") for n in names}
        cpu = rng.choice(["500m", "1", "2"])
        labels: dict[str, dict[str, str]] = {n: {} for n in names}
        taints: dict[str, list[dict[str, str]]] = {n: [] for n in names}
        existing: list[dict[str, Any]] = []
        spec: dict[str, Any] = {}
        pod_labels = {"app": "web"}
        if kind == "node-affinity":
            for n in chosen:
                labels[n]["gold"] = "yes"
            spec["affinity"] = _prefer((100, "gold"))
        elif kind == "node-affinity-tiers":
            full, *rest = sorted(chosen)
            chosen = set(rest) or {others.pop()}
            labels[full]["gold"] = "yes"
            for n in chosen:
                labels[n]["silver"] = "yes"
            existing.append(_pod(f"p{index}-hog", "3800m", node=full))
            spec["affinity"] = _prefer((80, "gold"), (20, "silver"))
        elif kind == "taint":
            for n in others:
                taints[n] = [SOFT]
        elif kind == "spread":
            for j, n in enumerate(others):
                existing += [_pod(f"p{index}-w{j}-{k}", "10m", {"app": "web"}, n)
                             for k in range(rng.randint(1, 2))]
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}}}]
        elif kind == "pod-affinity":
            target = rng.choice(sorted(chosen))
            chosen = {target}
            existing.append(_pod(f"p{index}-db", "10m", {"app": "db"}, target))
            spec["affinity"] = {"podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": _weighted(100, "db")}}
        elif kind == "weights":
            for n in others:
                labels[n]["gold"] = "yes"
                taints[n] = [SOFT]
            spec["affinity"] = _prefer((100, "gold"))
        else:
            for j, n in enumerate(others):
                existing.append(_pod(f"p{index}-db{j}", "10m", {"app": "db"}, n))
            spec["affinity"] = {"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": _weighted(100, "db")}}
        nodes = [_node(n, zones[n], labels[n], taints[n]) for n in names]
        cases.append(Case(index, kind, nodes, existing,
                          _pod(f"p{index}-p", cpu, pod_labels, **spec), chosen))
    return cases
