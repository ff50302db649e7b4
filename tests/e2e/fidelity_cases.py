"""Generated placement cases for the differential test against kube-scheduler.

Each case is a handful of nodes (labels, taints, cordons, capacities, an
extended resource), pods already running on them (requests, labels, host
ports, anti-affinity) and one pod to place (fractional and whole CPUs, memory,
an extended resource, tolerations, nodeSelector, node affinity, pod affinity
and anti-affinity, topology spread, a host port). The same seed gives the same
cases, so a disagreement can be replayed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
FPGA = "example.com/fpga"
TAINTS = [
    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "infra", "effect": "NoExecute"},
    {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
]
TOLERATIONS = [
    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Equal", "value": "infra"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
]


@dataclass
class Case:
    """One placement question: nodes, the pods on them, and the pod to place."""

    index: int
    nodes: list[dict[str, Any]]
    existing: list[dict[str, Any]]
    pod: dict[str, Any]
    features: set[str] = field(default_factory=set)

    def node_name(self, i: int) -> str:
        return f"c{self.index}-n{i}"


def _node(case: int, i: int, rng: random.Random, features: set[str]) -> dict[str, Any]:
    name = f"c{case}-n{i}"
    cpu = rng.choice(["1", "2", "4", "1500m", "8"])
    allocatable = {"cpu": cpu, "memory": rng.choice(["4Gi", "16Gi"]), "pods": "110"}
    if rng.random() < 0.3:
        allocatable[FPGA] = rng.choice(["1", "2"])
    labels = {HOST: name, ZONE: rng.choice("ab")}
    if rng.random() < 0.3:
        labels["disk"] = "ssd"
    spec: dict[str, Any] = {}
    if rng.random() < 0.3:
        spec["taints"] = [rng.choice(TAINTS)]
        features.add("taints")
    if rng.random() < 0.1:
        spec["unschedulable"] = True
        features.add("cordon")
    return {"metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"capacity": allocatable, "allocatable": allocatable}}


def _container(cpu: str | None, memory: str | None = None, fpga: int = 0,
               host_port: int | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    if fpga:
        requests[FPGA] = str(fpga)
    container: dict[str, Any] = {"name": "app", "image": "busybox",
                                 "resources": {"requests": requests, "limits": {
                                     k: v for k, v in requests.items() if k == FPGA}}}
    if host_port:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
    return container


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _millicores(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000


def _existing(case: Case, j: int, rng: random.Random, free: list[int]) -> dict[str, Any] | None:
    """A pod already running, on a node that has room for it (a kubelet admits no more)."""
    cpu = rng.choice(["50m", "100m", "500m", "1"])
    fits = [i for i, left in enumerate(free) if left >= _millicores(cpu)]
    if not fits:
        return None
    i = rng.choice(fits)
    free[i] -= _millicores(cpu)
    node = case.node_name(i)
    app = rng.choice(["web", "db"])
    port = 8080 if rng.random() < 0.2 else None
    spec: dict[str, Any] = {
        "nodeName": node, "terminationGracePeriodSeconds": 0,
        "containers": [_container(cpu, None, 0, port)],
    }
    if rng.random() < 0.15:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term("web", rng.choice([HOST, ZONE]))]}}
        case.features.add("existing-anti-affinity")
    return {"metadata": {"name": f"c{case.index}-e{j}", "labels": {"app": app}}, "spec": spec}


def _pod(case: Case, rng: random.Random) -> dict[str, Any]:
    features = case.features
    cpu = rng.choice(["100m", "250m", "500m", "1", "2", "3", "1500m"])
    memory = rng.choice([None, "256Mi", "1Gi"])
    fpga = 1 if rng.random() < 0.2 else 0
    port = 8080 if rng.random() < 0.2 else None
    features.add("fractional-cpu" if cpu.endswith("m") else "whole-cpu")
    if fpga:
        features.add("extended-resource")
    if port:
        features.add("host-port")
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0,
                            "containers": [_container(cpu, memory, fpga, port)]}
    if rng.random() < 0.4:
        spec["tolerations"] = rng.sample(TOLERATIONS, rng.randint(1, 2))
        features.add("tolerations")
    if rng.random() < 0.2:
        spec["nodeSelector"] = {ZONE: rng.choice("ab")}
        features.add("node-selector")
    affinity: dict[str, Any] = {}
    if rng.random() < 0.25:
        operator = rng.choice(["In", "NotIn", "Exists"])
        expression: dict[str, Any] = {"key": rng.choice([ZONE, "disk"]), "operator": operator}
        if operator != "Exists":
            expression["values"] = [rng.choice(["a", "b", "ssd"])]
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}
        features.add("node-affinity")
    if rng.random() < 0.2:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng.choice(["web", "db"]), rng.choice([ZONE, HOST]))]}
        features.add("pod-affinity")
    if rng.random() < 0.25:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng.choice(["web", "db"]), rng.choice([ZONE, HOST]))]}
        features.add("pod-anti-affinity")
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.25:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": rng.choice([ZONE, HOST]),
            "whenUnsatisfiable": rng.choice(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"app": "web"}}}]
        features.add("topology-spread")
    return {"metadata": {"name": f"c{case.index}-p", "labels": {"app": "web"}}, "spec": spec}


def generate(count: int, seed: int = 12) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        features: set[str] = set()
        nodes = [_node(index, i, rng, features) for i in range(rng.randint(2, 4))]
        case = Case(index, nodes, [], {}, features)
        free = [_millicores(n["status"]["allocatable"]["cpu"]) for n in nodes]
        found = (_existing(case, j, rng, free) for j in range(rng.randint(0, 4)))
        case.existing = [pod for pod in found if pod is not None]
        case.pod = _pod(case, rng)
        cases.append(case)
    return cases
