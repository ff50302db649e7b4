"""Generated placement cases for the differential test against kube-scheduler.

Each case is a handful of nodes (labels, taints, cordons, capacities, an
extended resource), pods already running on them (requests, labels, host
ports, anti-affinity) and one pod to place (fractional and whole CPUs, memory,
an extended resource, tolerations, nodeSelector, node affinity, pod affinity
and anti-affinity, topology spread, a host port). The same seed gives the same
cases, so a disagreement can be replayed.

:func:`sizing_cases` adds fixed cases for a pod's size (issue 27): native
sidecars before and after a large init container, pod-level requests with and
without container requests (CPU, memory, a pod-level limit alone, over a sidecar),
the RuntimeClass's overhead alone and on top of pod-level requests, and pods of
other schedulers sized those ways. Each shape is asked twice: on a node just too small
(kube-scheduler refuses) and beside a node just big enough (it binds there).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

from fluence_core.testing import make_node_dict

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
    kube_binds: bool | None = None
    """What kube-scheduler must answer, for a case built to test one answer (None: any)."""

    def node_name(self, i: int) -> str:
        return f"c{self.index}-n{i}"


def _node(case: int, i: int, rng: random.Random, features: set[str]) -> dict[str, Any]:
    name = f"c{case}-n{i}"
    cpu = rng.choice(["1", "2", "4", "1500m", "8"])
    memory = rng.choice(["4Gi", "16Gi"])
    fpga = {FPGA: rng.choice(["1", "2"])} if rng.random() < 0.3 else {}
    zone = rng.choice("ab")
    labels = {"disk": "ssd"} if rng.random() < 0.3 else {}
    taints = [rng.choice(TAINTS)] if rng.random() < 0.3 else []
    if taints:
        features.add("taints")
    cordoned = rng.random() < 0.1
    if cordoned:
        features.add("cordon")
    return make_node_dict(name, cpu, memory, hostname=True, zone=zone, labels=labels,
                          allocatable=fpga, taints=taints, unschedulable=cordoned, capacity=True)


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


# -- a pod's size (issue 27) ---------------------------------------------------------------

OVERHEAD_CLASS = "fidelity-overhead"
"""The RuntimeClass the overhead cases name; the test creates it with :data:`OVERHEAD`."""
OVERHEAD = {"cpu": "500m", "memory": "64Mi"}
SIZING_BASE = 1000
"""Sizing cases are numbered from here, apart from the generated ones."""


def _sized(name: str, cpu: str | None = None, memory: str | None = None,
           restart: str | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    body: dict[str, Any] = {"name": name, "image": "busybox",
                            "resources": {"requests": requests} if requests else {}}
    if restart:
        body["restartPolicy"] = restart
    return body


def _spec(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
          **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": containers,
                            **extra}
    if init:
        spec["initContainers"] = init
    return spec


# shape name -> (the pod's spec, the CPU it needs, the memory it needs or None)
SIZING_SHAPES: dict[str, tuple[dict[str, Any], str, str | None]] = {
    "sidecar": (_spec([_sized("app", "2")], [_sized("side", "2", restart="Always")]),
                "4", None),
    "sidecar-before-large-init": (
        _spec([_sized("app", "1")], [_sized("side", "1", restart="Always"),
                                     _sized("init", "4")]), "5", None),
    "sidecar-after-large-init": (
        _spec([_sized("app", "1")], [_sized("init", "4"),
                                     _sized("side", "1", restart="Always")]), "4", None),
    "sidecars-among-init": (
        _spec([_sized("app", "500m")], [_sized("init-a", "2"),
                                        _sized("side", "1", restart="Always"),
                                        _sized("init-b", "2")]), "3", None),
    "sidecar-memory": (
        _spec([_sized("app", "100m", "2Gi")], [_sized("side", "100m", "2Gi", restart="Always")]),
        "1", "4Gi"),
    "pod-level-with-container-requests": (
        _spec([_sized("app", "1", "256Mi")], resources={"requests": {"cpu": "3"}}), "3", None),
    "pod-level-without-container-requests": (
        _spec([_sized("app"), _sized("helper")],
              resources={"requests": {"cpu": "3", "memory": "1Gi"}}), "3", None),
    "pod-level-memory": (
        _spec([_sized("app", "100m", "256Mi")], resources={"requests": {"memory": "3Gi"}}),
        "1", "3Gi"),
    "pod-level-limits-only": (
        _spec([_sized("app"), _sized("helper")], resources={"limits": {"cpu": "3"}}), "3", None),
    "pod-level-over-sidecar": (
        _spec([_sized("app", "1")], [_sized("side", "1", restart="Always")],
              resources={"requests": {"cpu": "3"}}), "3", None),
    "overhead": (_spec([_sized("app", "2")], runtimeClassName=OVERHEAD_CLASS), "2500m", None),
    "pod-level-plus-overhead": (
        _spec([_sized("app", "1")], resources={"requests": {"cpu": "2"}},
              runtimeClassName=OVERHEAD_CLASS), "2500m", None),
}


def _sizing_node(cpu: str, memory: str = "16Gi") -> dict[str, Any]:
    """A node (``sizing_cases`` names it after its case)."""
    return make_node_dict("", cpu, memory, hostname=True, zone="a", capacity=True)


def _less(quantity: str) -> str:
    """Just under ``quantity``: 500m less CPU, 512Mi less memory."""
    if quantity.endswith("Gi"):
        return f"{int(quantity[:-2]) * 1024 - 512}Mi"
    return f"{_millicores(quantity) - 500}m"


def _foreign(spec: dict[str, Any]) -> dict[str, Any]:
    """A pod of another scheduler (``sizing_cases`` names it and binds it to a node)."""
    return {"metadata": {"name": "", "labels": {"app": "db"}}, "spec": copy.deepcopy(spec)}


def sizing_cases() -> list[Case]:
    """Each shape on a node just too small (refused), then beside one just big enough
    (bound there); and pods of other schedulers sized those ways, already on a node."""
    cases: list[Case] = []

    def add(shape: str, nodes: list[dict[str, Any]], pod_spec: dict[str, Any],
            binds: bool, existing: list[dict[str, Any]] | None = None) -> None:
        index = SIZING_BASE + len(cases)
        for i, node in enumerate(nodes):  # names follow the case's index
            node["metadata"]["name"] = node["metadata"]["labels"][HOST] = f"c{index}-n{i}"
        for pod in existing or []:
            pod["metadata"]["name"] = f"c{index}-e0"
            pod["spec"]["nodeName"] = nodes[0]["metadata"]["name"]
        cases.append(Case(index, nodes, existing or [], {
            "metadata": {"name": f"c{index}-p", "labels": {"app": "web"}},
            "spec": copy.deepcopy(pod_spec)}, {shape}, binds))

    for shape, (spec, cpu, memory) in SIZING_SHAPES.items():
        if memory:
            add(shape, [_sizing_node("8", _less(memory))], spec, False)
            add(shape, [_sizing_node("8", _less(memory)),
                        _sizing_node("8", memory)], spec, True)
        else:
            add(shape, [_sizing_node(_less(cpu))], spec, False)
            add(shape, [_sizing_node(_less(cpu)), _sizing_node(cpu)], spec, True)
    six_at_pod_level = _spec([_sized("app")], resources={"requests": {"cpu": "6"}})
    three_with_sidecar = _spec([_sized("app", "1")], [_sized("side", "2", restart="Always")])
    for shape, spec, free in (("foreign-pod-level", six_at_pod_level, "2"),
                              ("foreign-sidecar", three_with_sidecar, "1")):
        node_cpu = str(int(free) + (6 if shape == "foreign-pod-level" else 3))
        for cpu, binds in ((free, True), (str(int(free) + 1), False)):
            add(shape, [_sizing_node(node_cpu)], _spec([_sized("app", cpu)]), binds,
                [_foreign(spec)])
    return cases
